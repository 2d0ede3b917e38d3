! The Fortran module `braid`: Braid from Fortran 2008 through iso_c_binding,
! over the C API (include/braid/braid.h), as mpi_f08 is over MPI's.
!
! Why one file of ~600 lines: a Fortran module is one compilation unit, and
! each routine must spell out its dummy arguments (Fortran has no templates);
! the interface block to the C API is half of it.
!
! Conventions (the C API's):
!   - every routine takes an optional `ierr`. Present: it gets BRAID_OK or
!     the error's status code, and braid_error_string() the message. Absent:
!     an error prints the message and stops the program (error stop), as an
!     MPI program's default error handler does.
!   - buffers are contiguous rank-1 arrays of real(4), real(8), integer(1),
!     integer(4) or integer(8): one generic routine per op takes any of them
!     (class(*)) and passes the dtype it finds. `count` is optional: the
!     array's size by default. (For a 2-D array `a`, pass a rank-1 pointer
!     onto it: `p(1:size(a)) => a`.)
!   - ranks (root, src, dst) are global ranks; `group` is optional (the
!     default group when absent); `request` optional: absent, the call
!     blocks; present, it returns at once and braid_wait(request) completes it.
!   - sendbuf and recvbuf the same array: in place (gfortran passes both by
!     address; the standard frowns on such aliasing, MPI's bindings live with
!     it too).
!   - with `request`, C keeps the buffer's address until braid_wait: pass a
!     whole contiguous array (a strided section would be copied into a
!     temporary that is gone by then), and give it the ASYNCHRONOUS attribute
!     in the caller so the compiler does not keep its values in registers
!     across the wait. The dummies here are ASYNCHRONOUS for the same reason.
module braid
  use, intrinsic :: iso_c_binding
  implicit none
  private

  ! Status codes: braid.h's.
  integer, parameter, public :: BRAID_OK = 0, BRAID_ERR_INVALID_ARGUMENT = 1, BRAID_ERR_INVALID_STATE = 2, &
                                BRAID_ERR_TIMEOUT = 3, BRAID_ERR_PEER_FAILURE = 4, BRAID_ERR_TRANSPORT = 5, &
                                BRAID_ERR_STORE = 6, BRAID_ERR_NOT_SUPPORTED = 7, BRAID_ERR_INTERNAL = 8
  ! Reductions.
  integer, parameter, public :: BRAID_SUM = 0, BRAID_PROD = 1, BRAID_MIN = 2, BRAID_MAX = 3, BRAID_AVG = 4, &
                                BRAID_BAND = 5, BRAID_BOR = 6, BRAID_BXOR = 7
  integer, parameter, public :: BRAID_ANY_SOURCE = -2

  ! Element types (braid_dtype_t), chosen by the generic interfaces.
  integer(c_int), parameter :: DT_INT8 = 0, DT_INT32 = 2, DT_INT64 = 3, DT_FLOAT32 = 6, DT_FLOAT64 = 7

  type, public :: braid_group
    type(c_ptr) :: handle = c_null_ptr
  end type braid_group

  type, public :: braid_request
    type(c_ptr) :: handle = c_null_ptr
  end type braid_request

  public :: braid_init, braid_finalize, braid_rank, braid_size, braid_error_string
  public :: braid_group_new, braid_group_free, braid_group_rank, braid_group_size
  public :: braid_wait, braid_barrier
  public :: braid_broadcast, braid_all_reduce, braid_reduce, braid_all_gather, braid_send, braid_recv
  public :: braid_gather, braid_scatter, braid_reduce_scatter, braid_all_to_all, braid_sendrecv
  public :: braid_all_to_all_v
  public :: braid_group_split, braid_wait_any, braid_test
  integer, parameter, public :: BRAID_NO_COLOR = -1

  interface
    integer(c_int) function c_init(init_method, rank, world_size) bind(C, name="braid_init")
      import :: c_int, c_ptr
      type(c_ptr), value :: init_method
      integer(c_int), value :: rank, world_size
    end function
    integer(c_int) function c_finalize() bind(C, name="braid_finalize")
      import :: c_int
    end function
    integer(c_int) function c_rank() bind(C, name="braid_rank")
      import :: c_int
    end function
    integer(c_int) function c_size() bind(C, name="braid_size")
      import :: c_int
    end function
    type(c_ptr) function c_error_string() bind(C, name="braid_error_string")
      import :: c_ptr
    end function
    integer(c_int) function c_group_new(ranks, n, group) bind(C, name="braid_group_new")
      import :: c_int, c_ptr
      integer(c_int), intent(in) :: ranks(*)
      integer(c_int), value :: n
      type(c_ptr), intent(out) :: group
    end function
    integer(c_int) function c_group_free(group) bind(C, name="braid_group_free")
      import :: c_int, c_ptr
      type(c_ptr), value :: group
    end function
    integer(c_int) function c_group_rank(group) bind(C, name="braid_group_rank")
      import :: c_int, c_ptr
      type(c_ptr), value :: group
    end function
    integer(c_int) function c_group_size(group) bind(C, name="braid_group_size")
      import :: c_int, c_ptr
      type(c_ptr), value :: group
    end function
    integer(c_int) function c_wait(request) bind(C, name="braid_wait")
      import :: c_int, c_ptr
      type(c_ptr), value :: request
    end function
    integer(c_int) function c_barrier(group, request) bind(C, name="braid_barrier")
      import :: c_int, c_ptr
      type(c_ptr), value :: group, request
    end function
    integer(c_int) function c_broadcast(buf, count, dtype, root, group, request) bind(C, name="braid_broadcast")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: buf, group, request
      integer(c_int64_t), value :: count
      integer(c_int), value :: dtype, root
    end function
    integer(c_int) function c_all_reduce(sendbuf, recvbuf, count, dtype, op, group, request) &
        bind(C, name="braid_all_reduce")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: sendbuf, recvbuf, group, request
      integer(c_int64_t), value :: count
      integer(c_int), value :: dtype, op
    end function
    integer(c_int) function c_reduce(sendbuf, recvbuf, count, dtype, op, root, group, request) &
        bind(C, name="braid_reduce")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: sendbuf, recvbuf, group, request
      integer(c_int64_t), value :: count
      integer(c_int), value :: dtype, op, root
    end function
    integer(c_int) function c_all_gather(sendbuf, recvbuf, count, dtype, group, request) &
        bind(C, name="braid_all_gather")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: sendbuf, recvbuf, group, request
      integer(c_int64_t), value :: count
      integer(c_int), value :: dtype
    end function
    integer(c_int) function c_send(buf, count, dtype, dst, tag, group, request) bind(C, name="braid_send")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: buf, group, request
      integer(c_int64_t), value :: count, tag
      integer(c_int), value :: dtype, dst
    end function
    integer(c_int) function c_recv(buf, count, dtype, src, tag, group, source, request) bind(C, name="braid_recv")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: buf, group, source, request
      integer(c_int64_t), value :: count, tag
      integer(c_int), value :: dtype, src
    end function
    integer(c_int) function c_gather(sendbuf, recvbuf, count, dtype, root, group, request) bind(C, name="braid_gather")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: sendbuf, recvbuf, group, request
      integer(c_int64_t), value :: count
      integer(c_int), value :: dtype, root
    end function
    integer(c_int) function c_scatter(sendbuf, recvbuf, count, dtype, root, group, request) &
        bind(C, name="braid_scatter")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: sendbuf, recvbuf, group, request
      integer(c_int64_t), value :: count
      integer(c_int), value :: dtype, root
    end function
    integer(c_int) function c_reduce_scatter(sendbuf, recvbuf, count, dtype, op, group, request) &
        bind(C, name="braid_reduce_scatter")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: sendbuf, recvbuf, group, request
      integer(c_int64_t), value :: count
      integer(c_int), value :: dtype, op
    end function
    integer(c_int) function c_all_to_all_v(sendbuf, sendcounts, recvbuf, recvcounts, dtype, group, request) &
        bind(C, name="braid_all_to_all_v")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: sendbuf, recvbuf, group, request
      integer(c_int64_t), intent(in) :: sendcounts(*), recvcounts(*)
      integer(c_int), value :: dtype
    end function
    integer(c_int) function c_all_to_all(sendbuf, recvbuf, count, dtype, group, request) &
        bind(C, name="braid_all_to_all")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: sendbuf, recvbuf, group, request
      integer(c_int64_t), value :: count
      integer(c_int), value :: dtype
    end function
    integer(c_int) function c_sendrecv(sendbuf, sendcount, dst, recvbuf, recvcount, src, dtype, tag, group, source, &
                                       request) bind(C, name="braid_sendrecv")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: sendbuf, recvbuf, group, source, request
      integer(c_int64_t), value :: sendcount, recvcount, tag
      integer(c_int), value :: dst, src, dtype
    end function
    integer(c_int) function c_group_split(parent, color, key, group) bind(C, name="braid_group_split")
      import :: c_int, c_ptr
      type(c_ptr), value :: parent
      integer(c_int), value :: color, key
      type(c_ptr), intent(out) :: group
    end function
    integer(c_int) function c_wait_any(requests, n, index) bind(C, name="braid_wait_any")
      import :: c_int, c_ptr
      type(c_ptr), intent(inout) :: requests(*)
      integer(c_int), value :: n
      integer(c_int), intent(out) :: index
    end function
    integer(c_int) function c_test(request, done) bind(C, name="braid_test")
      import :: c_int, c_ptr
      type(c_ptr), intent(inout) :: request
      integer(c_int), intent(out) :: done
    end function
    function c_strlen(s) bind(C, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function
  end interface

contains

  ! This thread's last error message.
  function braid_error_string() result(msg)
    character(len=:), allocatable :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: n, i
    p = c_error_string()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [max(n, 1)])
    allocate (character(len=n) :: msg)
    do i = 1, n
      msg(i:i) = chars(i)
    end do
  end function

  ! Hands a status to ierr, or stops the program with the message.
  subroutine settle(st, what, ierr)
    integer(c_int), intent(in) :: st
    character(len=*), intent(in) :: what
    integer, intent(out), optional :: ierr
    if (present(ierr)) then
      ierr = int(st)
    else if (st /= BRAID_OK) then
      write (0, '(a, ": ", a)') what, braid_error_string()
      error stop 1
    end if
  end subroutine

  type(c_ptr) function group_ptr(group)
    type(braid_group), intent(in), optional :: group
    group_ptr = c_null_ptr
    if (present(group)) group_ptr = group%handle
  end function

  ! --- init and identity ------------------------------------------------------

  ! init_method: "env://" (default), "tcp://HOST:PORT" or "file:///path";
  ! rank and world_size -1 (default): from the environment.
  subroutine braid_init(init_method, rank, world_size, ierr)
    character(len=*), intent(in), optional :: init_method
    integer, intent(in), optional :: rank, world_size
    integer, intent(out), optional :: ierr
    character(kind=c_char, len=:), allocatable, target :: method
    type(c_ptr) :: mp
    integer(c_int) :: r, w
    mp = c_null_ptr
    if (present(init_method)) then
      method = init_method//c_null_char
      mp = c_loc(method)
    end if
    r = -1
    w = -1
    if (present(rank)) r = int(rank, c_int)
    if (present(world_size)) w = int(world_size, c_int)
    call settle(c_init(mp, r, w), "braid_init", ierr)
  end subroutine

  subroutine braid_finalize(ierr)
    integer, intent(out), optional :: ierr
    call settle(c_finalize(), "braid_finalize", ierr)
  end subroutine

  integer function braid_rank()
    braid_rank = int(c_rank())
  end function

  integer function braid_size()
    braid_size = int(c_size())
  end function

  ! --- groups -------------------------------------------------------------------

  subroutine braid_group_new(ranks, group, ierr)
    integer, intent(in) :: ranks(:)
    type(braid_group), intent(out) :: group
    integer, intent(out), optional :: ierr
    integer(c_int) :: list(size(ranks))
    list = int(ranks, c_int)
    call settle(c_group_new(list, int(size(ranks), c_int), group%handle), "braid_group_new", ierr)
  end subroutine

  subroutine braid_group_free(group, ierr)
    type(braid_group), intent(inout) :: group
    integer, intent(out), optional :: ierr
    call settle(c_group_free(group%handle), "braid_group_free", ierr)
    group%handle = c_null_ptr
  end subroutine

  integer function braid_group_rank(group)
    type(braid_group), intent(in) :: group
    braid_group_rank = int(c_group_rank(group%handle))
  end function

  integer function braid_group_size(group)
    type(braid_group), intent(in) :: group
    braid_group_size = int(c_group_size(group%handle))
  end function

  ! --- requests and the barrier ---------------------------------------------------

  subroutine braid_wait(request, ierr)
    type(braid_request), intent(inout) :: request
    integer, intent(out), optional :: ierr
    call settle(c_wait(request%handle), "braid_wait", ierr)
    request%handle = c_null_ptr
  end subroutine

  ! Splits parent (the world when absent) by colour: every member calls it;
  ! BRAID_NO_COLOR gives a group this rank is outside of (rank -1).
  subroutine braid_group_split(color, key, group, parent, ierr)
    integer, intent(in) :: color, key
    type(braid_group), intent(out) :: group
    type(braid_group), intent(in), optional :: parent
    integer, intent(out), optional :: ierr
    call settle(c_group_split(group_ptr(parent), int(color, c_int), int(key, c_int), group%handle), &
                "braid_group_split", ierr)
  end subroutine

  ! Waits until one of the requests completes; `index` (1-based) says which,
  ! and that request is released (its handle cleared).
  subroutine braid_wait_any(requests, index, ierr)
    type(braid_request), intent(inout) :: requests(:)
    integer, intent(out) :: index
    integer, intent(out), optional :: ierr
    type(c_ptr) :: handles(size(requests))
    integer(c_int) :: i0
    integer :: i
    do i = 1, size(requests)
      handles(i) = requests(i)%handle
    end do
    call settle(c_wait_any(handles, int(size(requests), c_int), i0), "braid_wait_any", ierr)
    do i = 1, size(requests)
      requests(i)%handle = handles(i)
    end do
    index = int(i0) + 1
  end subroutine

  ! Non-blocking: done is .true. once the op finished (the request is then
  ! released).
  subroutine braid_test(request, done, ierr)
    type(braid_request), intent(inout) :: request
    logical, intent(out) :: done
    integer, intent(out), optional :: ierr
    integer(c_int) :: d
    call settle(c_test(request%handle, d), "braid_test", ierr)
    done = d /= 0
  end subroutine

  subroutine braid_barrier(group, request, ierr)
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    call settle(c_barrier(group_ptr(group), req_ptr(request)), "braid_barrier", ierr)
  end subroutine

  ! Where the C call puts a request, or null (blocking).
  type(c_ptr) function req_ptr(request)
    type(braid_request), intent(in), optional, target :: request
    req_ptr = c_null_ptr
    if (present(request)) req_ptr = c_loc(request%handle)
  end function

  ! --- buffers ----------------------------------------------------------------------

  ! The dtype and address of a buffer; stops (or sets ierr) for a type the
  ! C API does not carry.
  subroutine describe(x, dt, p)
    class(*), intent(in), target, contiguous, asynchronous :: x(:)
    integer(c_int), intent(out) :: dt
    type(c_ptr), intent(out) :: p
    dt = -1
    p = c_null_ptr
    select type (x)
    type is (real(c_float))
      dt = DT_FLOAT32
      p = c_loc(x)
    type is (real(c_double))
      dt = DT_FLOAT64
      p = c_loc(x)
    type is (integer(c_int8_t))
      dt = DT_INT8
      p = c_loc(x)
    type is (integer(c_int32_t))
      dt = DT_INT32
      p = c_loc(x)
    type is (integer(c_int64_t))
      dt = DT_INT64
      p = c_loc(x)
    end select
  end subroutine

  ! Both buffers of an op: the dtype is -1 when their kinds differ.
  subroutine describe_pair(sendbuf, recvbuf, dt, ps, pr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:), recvbuf(:)
    integer(c_int), intent(out) :: dt
    type(c_ptr), intent(out) :: ps, pr
    integer(c_int) :: dt2
    call describe(sendbuf, dt, ps)
    call describe(recvbuf, dt2, pr)
    if (dt2 /= dt) dt = -1
  end subroutine

  ! The element count: `count` if given, else the array's size.
  integer(c_int64_t) function count_of(x, count)
    class(*), intent(in) :: x(:)
    integer, intent(in), optional :: count
    count_of = size(x, kind=c_int64_t)
    if (present(count)) count_of = int(count, c_int64_t)
  end function

  ! --- collectives and point to point ---------------------------------------------------
  ! A dtype of -1 (an unsupported type) reaches the C API, which answers
  ! BRAID_ERR_INVALID_ARGUMENT naming it.

  subroutine braid_broadcast(buf, root, count, group, request, ierr)
    class(*), intent(inout), target, contiguous, asynchronous :: buf(:)
    integer, intent(in) :: root
    integer, intent(in), optional :: count
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: p
    call describe(buf, dt, p)
    call settle(c_broadcast(p, count_of(buf, count), dt, int(root, c_int), group_ptr(group), req_ptr(request)), &
                "braid_broadcast", ierr)
  end subroutine

  subroutine braid_all_reduce(sendbuf, recvbuf, op, count, group, request, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:)
    class(*), intent(inout), target, contiguous, asynchronous :: recvbuf(:)
    integer, intent(in) :: op
    integer, intent(in), optional :: count
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: ps, pr
    call describe_pair(sendbuf, recvbuf, dt, ps, pr)
    call settle(c_all_reduce(ps, pr, count_of(sendbuf, count), dt, int(op, c_int), group_ptr(group), &
                             req_ptr(request)), "braid_all_reduce", ierr)
  end subroutine

  subroutine braid_reduce(sendbuf, recvbuf, op, root, count, group, request, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:)
    class(*), intent(inout), target, contiguous, asynchronous :: recvbuf(:)
    integer, intent(in) :: op, root
    integer, intent(in), optional :: count
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: ps, pr
    call describe_pair(sendbuf, recvbuf, dt, ps, pr)
    call settle(c_reduce(ps, pr, count_of(sendbuf, count), dt, int(op, c_int), int(root, c_int), &
                         group_ptr(group), req_ptr(request)), "braid_reduce", ierr)
  end subroutine

  ! count elements from each rank (default: the size of sendbuf); recvbuf
  ! holds group-size blocks in group rank order.
  subroutine braid_all_gather(sendbuf, recvbuf, count, group, request, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:)
    class(*), intent(inout), target, contiguous, asynchronous :: recvbuf(:)
    integer, intent(in), optional :: count
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: ps, pr
    call describe_pair(sendbuf, recvbuf, dt, ps, pr)
    call settle(c_all_gather(ps, pr, count_of(sendbuf, count), dt, group_ptr(group), req_ptr(request)), &
                "braid_all_gather", ierr)
  end subroutine

  subroutine braid_send(buf, dst, tag, count, group, request, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: buf(:)
    integer, intent(in) :: dst
    integer, intent(in), optional :: tag, count
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: p
    integer(c_int64_t) :: t
    call describe(buf, dt, p)
    t = 0
    if (present(tag)) t = int(tag, c_int64_t)
    call settle(c_send(p, count_of(buf, count), dt, int(dst, c_int), t, group_ptr(group), req_ptr(request)), &
                "braid_send", ierr)
  end subroutine

  ! src may be BRAID_ANY_SOURCE; `source` gets the sender's global rank
  ! (blocking receives; with a request it is -1).
  subroutine braid_recv(buf, src, tag, count, group, source, request, ierr)
    class(*), intent(inout), target, contiguous, asynchronous :: buf(:)
    integer, intent(in) :: src
    integer, intent(in), optional :: tag, count
    type(braid_group), intent(in), optional :: group
    integer, intent(out), optional :: source
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: p
    integer(c_int64_t) :: t
    integer(c_int), target :: from
    call describe(buf, dt, p)
    t = 0
    if (present(tag)) t = int(tag, c_int64_t)
    from = -1
    if (present(request)) then
      ! The sender is known only at completion, after this routine returned.
      call settle(c_recv(p, count_of(buf, count), dt, int(src, c_int), t, group_ptr(group), c_null_ptr, &
                         req_ptr(request)), "braid_recv", ierr)
    else
      call settle(c_recv(p, count_of(buf, count), dt, int(src, c_int), t, group_ptr(group), c_loc(from), &
                         c_null_ptr), "braid_recv", ierr)
    end if
    if (present(source)) source = int(from)
  end subroutine


  ! recvbuf (group-size blocks of count) matters on root only.
  subroutine braid_gather(sendbuf, recvbuf, root, count, group, request, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:)
    class(*), intent(inout), target, contiguous, asynchronous :: recvbuf(:)
    integer, intent(in) :: root
    integer, intent(in), optional :: count
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: ps, pr
    call describe_pair(sendbuf, recvbuf, dt, ps, pr)
    call settle(c_gather(ps, pr, count_of(sendbuf, count), dt, int(root, c_int), group_ptr(group), &
                         req_ptr(request)), "braid_gather", ierr)
  end subroutine

  ! sendbuf (group-size blocks of count, count defaulting to recvbuf's size)
  ! matters on root only.
  subroutine braid_scatter(sendbuf, recvbuf, root, count, group, request, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:)
    class(*), intent(inout), target, contiguous, asynchronous :: recvbuf(:)
    integer, intent(in) :: root
    integer, intent(in), optional :: count
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: ps, pr
    call describe_pair(sendbuf, recvbuf, dt, ps, pr)
    call settle(c_scatter(ps, pr, count_of(recvbuf, count), dt, int(root, c_int), group_ptr(group), &
                          req_ptr(request)), "braid_scatter", ierr)
  end subroutine

  ! sendbuf holds group-size blocks of count (default: recvbuf's size);
  ! recvbuf gets this rank's block reduced.
  subroutine braid_reduce_scatter(sendbuf, recvbuf, op, count, group, request, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:)
    class(*), intent(inout), target, contiguous, asynchronous :: recvbuf(:)
    integer, intent(in) :: op
    integer, intent(in), optional :: count
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: ps, pr
    call describe_pair(sendbuf, recvbuf, dt, ps, pr)
    call settle(c_reduce_scatter(ps, pr, count_of(recvbuf, count), dt, int(op, c_int), group_ptr(group), &
                                 req_ptr(request)), "braid_reduce_scatter", ierr)
  end subroutine

  ! count elements to and from each group rank (default: sendbuf's size over
  ! the group size).
  subroutine braid_all_to_all(sendbuf, recvbuf, count, group, request, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:)
    class(*), intent(inout), target, contiguous, asynchronous :: recvbuf(:)
    integer, intent(in), optional :: count
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: ps, pr
    integer(c_int64_t) :: per
    call describe_pair(sendbuf, recvbuf, dt, ps, pr)
    if (present(count)) then
      per = int(count, c_int64_t)
    else
      per = size(sendbuf, kind=c_int64_t) / max(1, int(c_group_size(group_ptr(group))))
    end if
    call settle(c_all_to_all(ps, pr, per, dt, group_ptr(group), req_ptr(request)), "braid_all_to_all", ierr)
  end subroutine

  ! Sends sendbuf to dst while receiving recvbuf from src (MPI_Sendrecv).
  subroutine braid_sendrecv(sendbuf, dst, recvbuf, src, tag, group, source, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:)
    class(*), intent(inout), target, contiguous, asynchronous :: recvbuf(:)
    integer, intent(in) :: dst, src
    integer, intent(in), optional :: tag
    type(braid_group), intent(in), optional :: group
    integer, intent(out), optional :: source
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: ps, pr
    integer(c_int64_t) :: t
    integer(c_int), target :: from
    call describe_pair(sendbuf, recvbuf, dt, ps, pr)
    t = 0
    if (present(tag)) t = int(tag, c_int64_t)
    from = -1
    call settle(c_sendrecv(ps, size(sendbuf, kind=c_int64_t), int(dst, c_int), pr, size(recvbuf, kind=c_int64_t), &
                           int(src, c_int), dt, t, group_ptr(group), c_loc(from), c_null_ptr), "braid_sendrecv", ierr)
    if (present(source)) source = int(from)
  end subroutine


  ! Uneven blocks: sendcounts(i) elements to group rank i-1, recvcounts(j)
  ! from group rank j-1, each packed in rank order. (Blocking: C reads the
  ! counts during the call only, but the buffers until braid_wait.)
  subroutine braid_all_to_all_v(sendbuf, sendcounts, recvbuf, recvcounts, group, request, ierr)
    class(*), intent(in), target, contiguous, asynchronous :: sendbuf(:)
    class(*), intent(inout), target, contiguous, asynchronous :: recvbuf(:)
    integer, intent(in) :: sendcounts(:), recvcounts(:)
    type(braid_group), intent(in), optional :: group
    type(braid_request), intent(out), optional, target :: request
    integer, intent(out), optional :: ierr
    integer(c_int) :: dt
    type(c_ptr) :: ps, pr
    integer(c_int64_t) :: sc(size(sendcounts)), rc(size(recvcounts))
    integer :: n
    n = int(c_group_size(group_ptr(group)))
    if (size(sendcounts) /= n .or. size(recvcounts) /= n) then
      ! Checked here: C would read one count per group rank.
      if (present(ierr)) then
        ierr = BRAID_ERR_INVALID_ARGUMENT
        return
      end if
      write (0, '(a, i0, a)') "braid_all_to_all_v: sendcounts and recvcounts need one entry per group rank (", n, ")"
      error stop 1
    end if
    sc = int(sendcounts, c_int64_t)
    rc = int(recvcounts, c_int64_t)
    call describe_pair(sendbuf, recvbuf, dt, ps, pr)
    call settle(c_all_to_all_v(ps, sc, pr, rc, dt, group_ptr(group), req_ptr(request)), "braid_all_to_all_v", ierr)
  end subroutine

end module braid
