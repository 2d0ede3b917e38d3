! The Fortran module `braid` as one rank of a job: run it with
! `braidrun -n 4 test_fortran` (meson test fortran). Each dtype kind through
! the generic routines, blocking and with a request, a subgroup, point to
! point, and errors through ierr that leave the job usable. Exits 0 when every
! check held, else stops with 1 after printing each failure.
program test_fortran
  use braid
  use, intrinsic :: iso_fortran_env, only: int8, int32, int64, real32, real64, error_unit
  implicit none
  integer :: me, n, ierr, failures, i, src
  real(real32) :: f(4), fout(4)
  real(real64) :: d(3)
  integer(int32) :: k(5), kout(5)
  integer(int64) :: big(2)
  integer(int8) :: b(2)
  integer(int32), allocatable :: gathered(:)
  integer(int32) :: gathered_out(64)
  type(braid_request) :: req
  type(braid_group) :: g

  failures = 0
  call check(braid_rank() == -1, "rank before init")
  call braid_init()
  me = braid_rank()
  n = braid_size()
  if (n < 2) then
    write (error_unit, *) "run with at least 2 ranks"
    error stop 1
  end if

  ! all_reduce: real(4) out of place, real(8) in place (max), int32, int64
  f = real(me + 1, real32)
  call braid_all_reduce(f, fout, BRAID_SUM)
  call check(all(fout == real(n * (n + 1) / 2, real32)), "all_reduce real(4) sum")
  d = [real(me, real64), -real(me, real64), 2.5_real64]
  call braid_all_reduce(d, d, BRAID_MAX)
  call check(d(1) == n - 1 .and. d(2) == 0 .and. d(3) == 2.5_real64, "all_reduce real(8) max in place")
  k = [(me * 10 + i, i = 1, 5)]
  call braid_all_reduce(k, kout, BRAID_SUM, request=req)
  call braid_wait(req)
  call check(kout(5) == 10 * n * (n - 1) / 2 + 5 * n, "all_reduce integer(4) with a request")
  big = int(me, int64) + 2_int64**40
  call braid_all_reduce(big, big, BRAID_SUM)
  call check(big(1) == n * 2_int64**40 + n * (n - 1) / 2, "all_reduce integer(8) past 32 bits")
  b = int(me + 1, int8)
  call braid_all_reduce(b, b, BRAID_MAX)
  call check(all(b == int(n, int8)), "all_reduce integer(1) max")

  ! broadcast from rank 1, with count smaller than the array
  k = -1
  if (me == 1) k = [5, 6, 7, 8, 9]
  call braid_broadcast(k, 1, count=3)
  call check(k(1) == 5 .and. k(3) == 7 .and. (me == 1 .or. k(4) == -1), "broadcast of a prefix")

  ! reduce to rank 0
  f = 1.0
  call braid_reduce(f, fout, BRAID_SUM, 0)
  if (me == 0) call check(all(fout == real(n, real32)), "reduce to rank 0")

  ! all_gather
  allocate (gathered(2 * n))
  call braid_all_gather([me, -me], gathered)
  call check(gathered(2 * n - 1) == n - 1 .and. gathered(2 * n) == -(n - 1), "all_gather")

  ! point to point: everyone sends to rank 0, which receives from any source
  if (me == 0) then
    do i = 1, n - 1
      k = 0
      call braid_recv(k, BRAID_ANY_SOURCE, tag=3, source=src)
      call check(k(1) == src * 100 .and. src >= 1, "recv from any source")
    end do
  else
    k = me * 100
    call braid_send(k, 0, tag=3)
  end if

  ! gather to rank 1, scatter from rank 2, reduce_scatter, all_to_all
  deallocate (gathered)
  allocate (gathered(2 * n))
  call braid_gather([me, me + 100], gathered, 1)
  if (me == 1) call check(gathered(2 * n - 1) == n - 1 .and. gathered(2) == 100, "gather")
  gathered = [(i, i = 1, 2 * n)]
  k = -1
  call braid_scatter(gathered, k(1:2), 2)
  call check(k(1) == 2 * me + 1 .and. k(2) == 2 * me + 2, "scatter")
  gathered = 1
  call braid_reduce_scatter(gathered, k(1:2), BRAID_SUM)
  call check(all(k(1:2) == n), "reduce_scatter")
  gathered = [(me * 10 + (i - 1) / 2, i = 1, 2 * n)]
  call braid_all_to_all(gathered, gathered_out(1:2 * n))
  call check(gathered_out(1) == 10 * 0 + me .and. gathered_out(2 * n) == 10 * (n - 1) + me, "all_to_all")

  ! all_to_all_v: rank r sends r+1 elements to each rank
  block
    integer(int32), allocatable :: vin(:), vout(:)
    integer :: sc(n), rc(n), j, pos
    sc = me + 1
    rc = [(j, j = 1, n)]
    allocate (vin(n * (me + 1)), vout(sum(rc)))
    vin = [((1000 * me + (j - 1) / (me + 1)), j = 1, n * (me + 1))]
    call braid_all_to_all_v(vin, sc, vout, rc)
    call braid_all_to_all_v(vin, sc(1:1), vout, rc, ierr=ierr)
    call check(ierr == BRAID_ERR_INVALID_ARGUMENT, "all_to_all_v with too few counts")
    pos = 0
    do j = 1, n
      call check(all(vout(pos + 1:pos + j) == 1000 * (j - 1) + me), "all_to_all_v block")
      pos = pos + j
    end do
  end block

  ! sendrecv around the ring, wait_any, test, split
  k = me
  kout = -1
  call braid_sendrecv(k, mod(me + 1, n), kout, mod(me + n - 1, n), tag=8, source=src)
  call check(kout(1) == mod(me + n - 1, n) .and. src == mod(me + n - 1, n), "sendrecv")
  block
    type(braid_request) :: rs(2)
    integer :: which
    logical :: done
    integer(int32) :: x(1), y(1)
    call braid_recv(x, mod(me + n - 1, n), tag=21, request=rs(1))
    call braid_recv(y, mod(me + 1, n), tag=22, request=rs(2))
    call braid_send([me], mod(me + 1, n), tag=21)
    call braid_send([me], mod(me + n - 1, n), tag=22)
    call braid_wait_any(rs, which)
    call check(which == 1 .or. which == 2, "wait_any index")
    done = .false.
    do while (.not. done)
      call braid_test(rs(3 - which), done)
    end do
    call check(x(1) == mod(me + n - 1, n) .and. y(1) == mod(me + 1, n), "wait_any and test")
  end block
  call braid_group_split(mod(me, 2), -me, g)
  call check(braid_group_size(g) == (n + 1 - mod(me, 2)) / 2, "group_split size")
  call braid_group_free(g)

  ! a subgroup of ranks 0 and 1
  call braid_group_new([1, 0], g)
  if (me <= 1) then
    call check(braid_group_rank(g) == 1 - me .and. braid_group_size(g) == 2, "group rank and size")
    f = 1.0
    call braid_all_reduce(f, f, BRAID_SUM, group=g)
    call check(all(f == 2.0), "all_reduce on a subgroup")
  else
    call check(braid_group_rank(g) == -1, "outside the subgroup")
  end if
  call braid_group_free(g)
  call braid_barrier()

  ! errors through ierr; the job goes on
  call braid_broadcast(k, n + 5, ierr=ierr)
  call check(ierr == BRAID_ERR_INVALID_ARGUMENT, "a root out of range gives INVALID_ARGUMENT")
  call check(index(braid_error_string(), "rank") > 0, "the message names the rank")
  call braid_all_reduce(f, k, BRAID_SUM, ierr=ierr)
  call check(ierr == BRAID_ERR_INVALID_ARGUMENT, "mixed kinds give INVALID_ARGUMENT")
  k = 1
  call braid_all_reduce(k, k, BRAID_SUM, ierr=ierr)
  call check(ierr == BRAID_OK .and. k(1) == n, "the job is usable after argument errors")

  call braid_finalize(ierr)
  call check(ierr == BRAID_OK, "finalize")
  if (failures > 0) then
    write (error_unit, '(a, i0, a, i0, a)') "rank ", me, ": ", failures, " check(s) failed"
    error stop 1
  end if
  print '(a, i0, a, i0, a)', "rank ", me, " of ", n, ": Fortran module ok"

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write (error_unit, '(a, i0, a, a)') "rank ", me, ": check failed: ", what
      failures = failures + 1
    end if
  end subroutine

end program test_fortran
