"""Rank processes for the torch tests: free ports, and a job of N ranks.

Each rank is `argv` run with MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE
set, as torch's env:// init method reads them.
"""
import os
import socket
import subprocess


def free_ports(n):
    """n distinct ports that were free a moment ago (all bound at once, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def launch(argv, world, port, timeout, capture=False, env=None):
    """Runs `world` ranks of argv; returns each rank's (exit code or "timeout", output or None)."""
    procs = []
    for r in range(world):
        e = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE=str(world),
                 **(env or {}))
        out = subprocess.PIPE if capture else None
        procs.append(subprocess.Popen(argv, env=e, stdout=out, stderr=subprocess.STDOUT if capture else None,
                                      text=True))
    results = []
    for p in procs:
        try:
            out = p.communicate(timeout=timeout)[0]
            results.append((p.returncode, out))
        except subprocess.TimeoutExpired:
            p.kill()
            results.append(("timeout", p.communicate()[0]))
    return results
