#!/usr/bin/env python3
"""A network that drops packets (python3 stdlib only): listens on 127.0.0.1:PORT (0 = any) with an accept queue
of one that it fills itself and never accepts from, so every further connection's SYN goes unanswered and a
client's connect hangs until its own timeout — what a dead Wi-Fi or a VPN that went down looks like. Prints its
port on the first stdout line; stops when its stdin closes.

  blackhole.py [PORT]
"""
import socket
import sys

port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(0)
port = server.getsockname()[1]
fillers = []
for _ in range(4):
    filler = socket.socket()
    filler.setblocking(False)
    try:
        filler.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    fillers.append(filler)
print(port, flush=True)
sys.stdin.read()
