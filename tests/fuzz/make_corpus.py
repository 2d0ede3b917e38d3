#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into corpus/<target>/seed-*.

The seeds are well-formed examples of what each parser reads (the fuzzers
grow the corpus from them; tools/fuzz merges what they find back in).
Run from anywhere: python3 tests/fuzz/make_corpus.py"""
import os, struct

here = os.path.dirname(os.path.abspath(__file__))

def write(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

# grammars: the first byte picks the grammar (fuzz_grammars.cpp)
for i, t in enumerate(["tcp://127.0.0.1:29500", "tcp://[::1]:80", "file:///tmp/braid_init", "env://"]):
    write("grammars", f"init{i}", b"\x00" + t.encode())
write("grammars", "algo", b"\x01allreduce:ring;broadcast:tree;allgather:staged")
write("grammars", "ifname", b"\x02^docker,lo")
write("grammars", "ifname-exact", b"\x02=eth0,ib0")
write("grammars", "hca", b"\x03^=mlx5_0:1,mlx5_1")
write("grammars", "cpus", b"\x040-3,8\n0\n1-2,4-7")
write("grammars", "integer", b"\x0565536")

# store values (fuzz_store_values.cpp): each parser gets the same bytes
write("store_values", "peer", "0f1e2d3c/uid0/pidns4026531836/netns4026531840|4242\ntcp=10.0.0.2:40000\nshm=braid-1-2\nverbs=-")
write("store_values", "job", "12345678901234567890 4")
write("store_values", "abort", "2\n")
write("store_values", "abort-none", "-1\n")

# file store (fuzz_file_store.cpp): mode 0 frames records with checksums
def fnv1a(b):
    h = 2166136261
    for x in b:
        h = ((h ^ x) * 16777619) & 0xffffffff
    return h
recs = b""
for typ, k, v in [(1, b"a", b"one"), (1, b"count", b"2"), (2, b"a", b""), (1, b"", struct.pack("<q", 1))]:
    recs += bytes([typ, len(k), len(v)]) + k + v
write("file_store", "framed", b"\x00" + recs)
raw = b"BRAIDFS1"
for typ, k, v in [(1, b"a", b"one"), (1, b"b", b"two")]:
    r = bytes([typ]) + struct.pack("<II", len(k), len(v)) + k + v
    raw += r + struct.pack("<I", fnv1a(r))
write("file_store", "raw", b"\x01" + raw)

# TCP frames (fuzz_tcp_frames.cpp): 48-byte headers, job 0x1234, world 3
MAGIC, VERSION = 0x44524231, 1
HELLO, EAGER, RTS, CTS, DATA, BYE, AUTH, PROOF, SWITCH, FOLLOWS = range(1, 11)
def frame(t, ctx=0, tag=0, nbytes=0, id_=0, id2=0, reserved=0):
    return struct.pack("<IHBBIIqQQQ", MAGIC, VERSION, t, reserved, ctx, 0, tag, nbytes, id_, id2)
hello = frame(HELLO, tag=0x1234, id_=1, id2=3)
write("tcp_frames", "eager", b"\x00" + hello + frame(EAGER, ctx=1, tag=7, nbytes=4) + b"\x01\x02\x03\x04" + frame(BYE))
write("tcp_frames", "rts-data", b"\x00" + hello + frame(RTS, tag=3, nbytes=100000, id_=9) + frame(DATA, nbytes=16, id2=5) + bytes(16))
write("tcp_frames", "auth-hello", b"\x02" + frame(HELLO, tag=0x1234, nbytes=32, id_=2, id2=3) + bytes(range(32)) + frame(PROOF, nbytes=32) + bytes(32))
write("tcp_frames", "dialed-cts", b"\x01" + frame(CTS, id_=1, id2=0) + frame(BYE))
# One socket per pair: a sharing dialer's FOLLOWS before its SWITCH (the
# socket waits), and a SWITCH twice (a peer out of its protocol).
write("tcp_frames", "shared-follows", b"\x00" + frame(HELLO, tag=0x1234, id_=1, id2=3, reserved=1) + frame(FOLLOWS)
      + frame(EAGER, ctx=1, tag=7, nbytes=4) + b"\x01\x02\x03\x04" + frame(SWITCH, id_=1) + frame(BYE, id2=1))
write("tcp_frames", "dialed-switch", b"\x01" + frame(SWITCH, id_=1) + frame(FOLLOWS) + frame(SWITCH, id_=1))
write("tcp_frames", "dialed-auth", b"\x03" + frame(AUTH, nbytes=64) + bytes(64) + frame(CTS, id_=1, id2=2))

# shm ring (fuzz_shm_ring.cpp): tail, head, then the ring's lines
def record(t, length, nbytes=0, token=0):
    h = struct.pack("<IB3xIIqQQQQ", length, t, 0, 0, 5, nbytes, token, 0, 0)
    return h + bytes(64 - len(h))
ring = record(2, 128, 8) + b"payload!" + bytes(56) + record(1, 64) + record(4, 64, token=3)
ring += bytes(512 - len(ring))
write("shm_ring", "records", struct.pack("<QQ", 0, 256) + ring)

# store protocol: server side (fuzz_store_server.cpp), chunks per client
SMAGIC = 0x54535242
def sframe(code, *fields):
    body = b"".join(struct.pack("<I", len(f)) + f for f in fields)
    return struct.pack("<IHHII", SMAGIC, 1, code, len(fields), len(body)) + body
SET, GET, TRYGET, ADD, CAS, DELETE, WAIT, CHECK, NUMKEYS, SHELLO, SPROOF = range(1, 12)
def chunk(client, data):
    return bytes([client | ((len(data) >> 8) << 2), len(data) & 0xff]) + data
server = chunk(1, sframe(GET, b"k")) + chunk(0, sframe(SET, b"k", b"v") + sframe(ADD, b"n", struct.pack("<q", 3)))
server += chunk(2, sframe(WAIT, b"k", b"n") + sframe(CAS, b"k", b"v", b"w") + sframe(CHECK, b"k") + sframe(NUMKEYS))
server += chunk(0, sframe(DELETE, b"k") + sframe(TRYGET, b"k"))
write("store_server", "server", b"\x00" + server)
write("store_server", "server-auth", b"\x02" + chunk(0, sframe(SHELLO, bytes(32)) + sframe(SPROOF, bytes(32))) + chunk(1, sframe(GET, b"k")))
# client side (fuzz_store_client.cpp): the replies
client = sframe(0, struct.pack("<q", 0)) + sframe(1) + sframe(0, struct.pack("<q", 1))
write("store_client", "client", b"\x01" + client)
write("store_client", "client-auth", b"\x03" + sframe(0, bytes(32), bytes(32)) + sframe(0))

# verbs hello (fuzz_verbs_hello.cpp): a REQUEST from rank 1 of job 0x1234
vh = struct.pack("<IHBBQii16sIIHBBHBBII", 0x56524231, 1, 1, 0, 0x1234, 1, 4, bytes(16), 77, 1000, 1, 3, 1, 16, 4, 0, 65536, 0)
write("verbs_hello", "request", vh)
# an RDMA window record (window_record.hpp): rank 1 of group 7's 2-member
# window, 64 KiB blocks; endpoints: GID, QPN, PSN, LID, MTU, Ethernet, READ depth
def endpoint(qpn):
    return struct.pack("<16sIIHBBBx", bytes(16), qpn, 1000, 1, 3, 1, 16)
head = struct.pack("<IIIIQQII", 0x31575642, 7, 1, 2, 0x7f0000001000, 65536, 0x1234, 0)
write("verbs_hello", "window-record", head + endpoint(77) + endpoint(78))
