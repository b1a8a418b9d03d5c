#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A man-in-the-middle TCP proxy that damages traffic on request, for the
railio:// and s3:// fault tests. Standard library only.

    mitm.py --listen 127.0.0.1:0 --target HOST:PORT --port-file FILE
        [--proto raw|railio|http] [--mode pass|flip|truncate|stall|dup|delay]
        [--dir c2s|s2c] [--nth N] [--count C] [--offset K] [--delay-ms D]
        [--seed S] [--summary FILE]

Listens on 127.0.0.1 only (port 0: a free one), writes the port (decimal and
a newline) to FILE once it accepts connections. Every client connection gets
its own connection to --target (loopback only); both directions are
forwarded by a thread each.

Messages, the unit faults count in:
  railio  a frame: a 32-byte header, then body_len bytes (little-endian u32
          at header offset 16).
  http    an HTTP/1.1 message: the header block up to CRLFCRLF, then its body
          (Content-Length bytes, a chunked body up to its last chunk and
          trailers, or for a response without either, up to EOF). Responses
          to HEAD, 1xx, 204 and 304 have no body (the request methods seen
          from the client on that connection are matched FIFO; 1xx answers
          are interim and do not use one up).
  raw     one recv() buffer. With --offset K, each connection's stream in
          --dir is split at byte K, and the piece from byte K to the end of
          that recv() buffer is the only candidate message of the connection
          (--nth then counts connections that reached byte K).

The fault hits message number --nth (1-based, counted across all
connections in --dir, in the order their first bytes are framed) and the
--count - 1 after it (--count 0: every message from the Nth on). --offset K
is a byte offset within the message (the header included); modes:
  pass      forward everything (the default)
  flip      XOR the byte at K (default: a seeded random offset) with
            1 << (seed % 8)
  truncate  forward K bytes of the message (default: half of it), then close
            both sides of the connection
  stall     forward K bytes of the message (default 0), then nothing more in
            that direction (nothing more is read either) until either peer
            closes
  dup       forward the message twice
  delay     wait --delay-ms (default 2000) before forwarding the message and
            everything after it in that direction

--summary FILE holds JSON, rewritten (atomically) before a faulted message
leaves, within 100 ms of any other change and on SIGTERM/SIGINT:
  {"connections": n, "faults": n, "messages": {"c2s": n, "s2c": n},
   "actions": [{"conn": i, "dir": "s2c", "msg": n, "mode": "flip",
                "offset": k, "len": n}, ...]}
conn is the 1-based accept order, msg the message's 1-based number in its
direction, offset the byte offset in the message (raw: in the connection's
stream), len the message length (-1 where not known). actions keeps the
first 10000.

Exits 0 on SIGTERM/SIGINT. When its parent process is gone it exits too,
removing FILE and the summary (and their directory, if that leaves it
empty).
"""

import argparse
import collections
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import threading
import time

RECV = 1 << 20
HDR_MAX = 1 << 20  # an HTTP header block, a chunk-size line
MAX_ACTIONS = 10000


def die(msg):
    sys.stderr.write("mitm: %s\n" % msg)
    sys.exit(2)


def hostport(s, what):
    host, sep, port = s.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        die("%s: expected HOST:PORT, got %r" % (what, s))
    host = host.strip("[]")
    return host, int(port)


def is_loopback(host):
    return host in ("localhost", "::1") or host.startswith("127.")


# ---------------------------------------------------------------- framing
#
# A framer turns a direction's byte stream into events:
#   ("start", total_len_or_None)   a message begins (its header is complete)
#   ("data", bytes_like)           bytes of the current message
#   ("end",)                       the current message is complete
#   ("raw", bytes_like)            bytes outside any message (raw mode)
# feed() returns the events for one recv(); eof() those the end of the
# stream completes (and any held bytes, so nothing is ever lost).


def framer_eof(fr):
    """At EOF: a partial header goes out as it is (outside any message); a
    message cut short ends there."""
    if fr.hdr:
        ev = [("raw", bytes(fr.hdr))]
        fr.hdr = bytearray()
        return ev
    return [("end",)] if fr.in_body() else []


class RailioFramer:
    def __init__(self):
        self.hdr = bytearray()
        self.left = 0  # body bytes still to come in the current frame

    def feed(self, mv):
        ev = []
        i, n = 0, len(mv)
        while i < n:
            if self.left:
                k = min(self.left, n - i)
                ev.append(("data", mv[i:i + k]))
                i += k
                self.left -= k
                if not self.left:
                    ev.append(("end",))
                continue
            k = min(32 - len(self.hdr), n - i)
            self.hdr += mv[i:i + k]
            i += k
            if len(self.hdr) == 32:
                blen = struct.unpack_from("<I", self.hdr, 16)[0]
                ev.append(("start", 32 + blen))
                ev.append(("data", bytes(self.hdr)))
                self.hdr = bytearray()
                self.left = blen
                if not blen:
                    ev.append(("end",))
        return ev

    def in_body(self):
        return self.left > 0

    def eof(self):
        return framer_eof(self)


class RawFramer:
    def __init__(self, offset):
        self.offset = offset  # None, or the stream offset that splits
        self.pos = 0

    def feed(self, mv):
        n = len(mv)
        start, self.pos = self.pos, self.pos + n
        if self.offset is None:
            return [("start", n), ("data", mv), ("end",)]
        k = self.offset
        if not start <= k < start + n:
            return [("raw", mv)]
        ev = []
        if k > start:
            ev.append(("raw", mv[:k - start]))
        ev += [("start", start + n - k), ("data", mv[k - start:]), ("end",)]
        return ev

    def eof(self):
        return []


class HttpFramer:
    """One direction of an HTTP/1.1 connection. The request side pushes the
    methods it frames on `methods`; the response side pops them."""

    def __init__(self, request, methods):
        self.request = request
        self.methods = methods
        self.hdr = bytearray()
        self.state = "hdr"  # hdr | len | eofbody | csize | cdata | trailer | raw
        self.left = 0
        self.line = bytearray()
        self.dup_last = None  # method of the last request (for dup)

    def _head(self, block):
        """Parse a header block; (body kind, length)."""
        lines = bytes(block).split(b"\r\n")
        first = lines[0].split(None, 2)
        clen, chunked = None, False
        for ln in lines[1:]:
            name, sep, val = ln.partition(b":")
            if not sep:
                continue
            name = name.strip().lower()
            val = val.strip()
            if name == b"content-length" and val.isdigit():
                clen = int(val)
            elif name == b"transfer-encoding" and b"chunked" in val.lower():
                chunked = True
        if self.request:
            method = first[0].upper() if first else b"GET"
            self.methods.append(method)
            self.dup_last = method
            if chunked:
                return "chunked", None
            return ("len", clen) if clen else ("none", 0)
        status = 200
        if len(first) >= 2 and first[1].isdigit():
            status = int(first[1])
        if 100 <= status < 200:
            return "none", 0  # interim: the request is still unanswered
        method = self.methods.popleft() if self.methods else b"GET"
        if method == b"HEAD" or status in (204, 304):
            return "none", 0
        if chunked:
            return "chunked", None
        if clen is not None:
            return ("len", clen) if clen else ("none", 0)
        return "eofbody", None

    def feed(self, mv):
        ev = []
        i, n = 0, len(mv)
        while i < n:
            st = self.state
            if st == "raw":
                ev.append(("data", mv[i:]))
                break
            if st == "hdr":
                # Search from a little before the new bytes for CRLFCRLF.
                base = len(self.hdr)
                self.hdr += mv[i:]
                end = self.hdr.find(b"\r\n\r\n", max(0, base - 3))
                if end < 0:
                    if len(self.hdr) > HDR_MAX:
                        sys.stderr.write("mitm: header block over %d bytes: "
                                         "forwarding the rest unframed\n" % HDR_MAX)
                        ev += [("start", None), ("data", bytes(self.hdr))]
                        self.hdr = bytearray()
                        self.state = "raw"
                    break
                hlen = end + 4
                used = hlen - base
                block = bytes(self.hdr[:hlen])
                self.hdr = bytearray()
                i += used
                kind, blen = self._head(block)
                ev.append(("start", hlen + blen if kind in ("len", "none") else None))
                ev.append(("data", block))
                if kind == "none":
                    ev.append(("end",))
                elif kind == "len":
                    self.state, self.left = "len", blen
                elif kind == "eofbody":
                    self.state = "eofbody"
                else:
                    self.state = "csize"
                continue
            if st in ("len", "cdata"):
                k = min(self.left, n - i)
                ev.append(("data", mv[i:i + k]))
                i += k
                self.left -= k
                if not self.left:
                    if st == "len":
                        ev.append(("end",))
                        self.state = "hdr"
                    else:
                        self.state = "csize"
                continue
            if st == "eofbody":
                ev.append(("data", mv[i:]))
                break
            # csize / trailer: line oriented
            j = bytes(mv[i:i + 4096]).find(b"\n")
            if j < 0 and n - i > 4096:
                self.state = "raw"  # not a chunk-size line: give up framing
                continue
            if j < 0:
                self.line += mv[i:]
                ev.append(("data", mv[i:]))
                if len(self.line) > HDR_MAX:
                    self.state = "raw"
                break
            self.line += mv[i:i + j + 1]
            ev.append(("data", mv[i:i + j + 1]))
            i += j + 1
            line = bytes(self.line).strip()
            self.line = bytearray()
            if st == "csize":
                try:
                    size = int(line.split(b";")[0], 16)
                except ValueError:
                    self.state = "raw"
                    continue
                if size == 0:
                    self.state = "trailer"
                else:
                    self.state, self.left = "cdata", size + 2
            elif not line:  # trailer section ends with an empty line
                ev.append(("end",))
                self.state = "hdr"
        return ev

    def in_body(self):
        return self.state != "hdr"

    def eof(self):
        return framer_eof(self)


# ------------------------------------------------------------------ state


class Stats:
    def __init__(self, path):
        self.path = path
        # Reentrant: the SIGTERM handler writes on the main thread, which
        # may be inside either lock when the signal arrives.
        self.lock = threading.RLock()
        self.wlock = threading.RLock()
        self.connections = 0
        self.faults = 0
        self.messages = {"c2s": 0, "s2c": 0}
        self.actions = []
        self.dirty = False

    def write(self):
        if not self.path:
            return
        # One writer at a time, snapshot and replace together: a periodic
        # write whose snapshot predates a fault must not land after the
        # fault's own write and hide it.
        with self.wlock:
            with self.lock:
                doc = {"connections": self.connections, "faults": self.faults,
                       "messages": dict(self.messages), "actions": list(self.actions)}
                self.dirty = False
            tmp = "%s.tmp" % self.path
            with open(tmp, "w") as f:
                json.dump(doc, f)
                f.write("\n")
            os.replace(tmp, self.path)

    def writer(self):
        while True:
            time.sleep(0.1)
            if self.dirty:
                self.write()


class Conn:
    def __init__(self, cid, client, upstream):
        self.cid = cid
        self.socks = {"c2s": (client, upstream), "s2c": (upstream, client)}
        self.client, self.upstream = client, upstream
        self.lock = threading.Lock()
        self.dead = False
        self.running = 2
        self.methods = collections.deque()

    def kill(self):
        """Close both sides now (truncate, stall end, errors)."""
        with self.lock:
            self.dead = True
        for s in (self.client, self.upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def done(self):
        with self.lock:
            self.running -= 1
            last = self.running == 0
        if last:
            for s in (self.client, self.upstream):
                # Unread bytes at close() make the kernel send a reset,
                # which can drop what was sent before a truncation: discard
                # them first.
                try:
                    s.setblocking(False)
                    while s.recv(1 << 16):
                        pass
                except OSError:
                    pass
                s.close()


class Proxy:
    def __init__(self, a):
        self.a = a
        self.stats = Stats(a.summary)
        self.rng = random.Random(a.seed)
        self.mask = 1 << (a.seed % 8)
        self.sel_lock = threading.Lock()
        self.seen = 0  # messages in --dir that were candidates

    # Number a message in dir; the fault parameters if it is selected.
    def select(self, conn, d, length):
        a = self.a
        with self.stats.lock:
            self.stats.messages[d] += 1
            msgno = self.stats.messages[d]
            self.stats.dirty = True
        if a.mode == "pass" or d != a.dir:
            return None
        with self.sel_lock:
            self.seen += 1
            n = self.seen
            if n < a.nth or (a.count and n >= a.nth + a.count):
                return None
            return {"n": n, "msgno": msgno, "len": length, "rand": self.rng.random()}

    def record(self, conn, d, sel, offset, length):
        act = {"conn": conn.cid, "dir": d, "msg": sel["msgno"], "mode": self.a.mode,
               "offset": offset, "len": -1 if length is None else length}
        with self.stats.lock:
            self.stats.faults += 1
            if len(self.stats.actions) < MAX_ACTIONS:
                self.stats.actions.append(act)
        self.stats.write()

    def framer(self, conn, d):
        p = self.a.proto
        if p == "railio":
            return RailioFramer()
        if p == "http":
            return HttpFramer(d == "c2s", conn.methods)
        return RawFramer(self.a.offset)

    # ---------------------------------------------------------- one direction

    def pump(self, conn, d):
        src, dst = conn.socks[d]
        try:
            self._pump(conn, d, src, dst)
        except OSError:
            conn.kill()
        finally:
            conn.done()

    def _pump(self, conn, d, src, dst):
        a = self.a
        fr = self.framer(conn, d)
        buf = bytearray(RECV)
        view = memoryview(buf)
        cur = None  # the fault on the current message: a dict, or None
        raw_base = 0  # raw: stream offset where the current message starts
        stream = 0
        while True:
            if conn.dead:
                return
            n = src.recv_into(buf)
            if n == 0:
                events = fr.eof()
                at_eof = True
            else:
                events = fr.feed(view[:n])
                at_eof = False
            pos = stream
            for ev in events:
                kind = ev[0]
                if kind == "raw":
                    dst.sendall(ev[1])
                    pos += len(ev[1])
                elif kind == "start":
                    raw_base = pos
                    sel = self.select(conn, d, ev[1])
                    cur = self.begin(conn, d, sel, ev[1]) if sel else None
                elif kind == "data":
                    if cur is None:
                        dst.sendall(ev[1])
                    elif not self.data(conn, d, dst, cur, ev[1], raw_base):
                        return  # truncated or stalled: this direction is over
                    pos += len(ev[1])
                else:  # end
                    if cur is not None and not self.end(conn, d, dst, cur, raw_base):
                        return
                    cur = None
            stream += n
            if at_eof:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return

    def begin(self, conn, d, sel, length):
        a = self.a
        f = {"sel": sel, "len": length, "pos": 0, "copy": None, "hold": None, "k": None}
        mode = a.mode
        if mode == "delay":
            self.record(conn, d, sel, 0, length)
            time.sleep(a.delay_ms / 1000.0)
            f["done"] = True
            return f
        f["done"] = False
        if mode == "dup":
            f["copy"] = bytearray()
        elif mode in ("flip", "truncate") and a.offset is None and a.proto != "raw" \
                and length is None:
            f["hold"] = bytearray()  # the offset needs the length: buffer it
        else:
            self.fix_offset(f)
        return f

    def fix_offset(self, f):
        a, length = self.a, f["len"]
        if a.proto == "raw" and a.offset is not None:
            k = 0  # the message starts at the stream offset
        elif a.offset is not None:
            k = a.offset
        elif a.mode == "flip":
            k = int(f["sel"]["rand"] * length)
        elif a.mode == "truncate":
            k = length // 2
        else:
            k = 0
        if a.mode == "flip" and length is not None and length > 0 and k >= length:
            k = length - 1
        f["k"] = k

    def where(self, f, raw_base):
        return raw_base + f["k"] if self.a.proto == "raw" else f["k"]

    def data(self, conn, d, dst, f, chunk, raw_base):
        """Forward chunk of a selected message; False once the direction ends."""
        a = self.a
        if f["hold"] is not None:
            f["hold"] += chunk
            return True
        if f["done"]:
            dst.sendall(chunk)
            if f["copy"] is not None:
                f["copy"] += chunk
            return True
        mode, k, pos, n = a.mode, f["k"], f["pos"], len(chunk)
        f["pos"] = pos + n
        if mode == "dup":
            if pos == 0:
                self.record(conn, d, f["sel"], 0, f["len"])
            f["copy"] += chunk
            dst.sendall(chunk)
            return True
        if mode == "flip":
            if pos <= k < pos + n:
                self.record(conn, d, f["sel"], self.where(f, raw_base), f["len"])
                b = bytearray(chunk)
                b[k - pos] ^= self.mask
                dst.sendall(b)
                f["done"] = True
            else:
                dst.sendall(chunk)
            return True
        # truncate, stall: forward up to k, then act
        if pos + n <= k:
            dst.sendall(chunk)
            return True
        if k > pos:
            dst.sendall(chunk[:k - pos])
        return self.cut(conn, d, f, raw_base)

    def cut(self, conn, d, f, raw_base):
        self.record(conn, d, f["sel"], self.where(f, raw_base), f["len"])
        if self.a.mode == "truncate":
            conn.kill()
            return False
        self.stall(conn)
        return False

    def end(self, conn, d, dst, f, raw_base):
        a = self.a
        if f["hold"] is not None:
            whole = f["hold"]
            f["hold"] = None
            f["len"] = len(whole)
            self.fix_offset(f)
            return self.data(conn, d, dst, f, memoryview(whole), raw_base) and \
                self.end(conn, d, dst, f, raw_base)
        if a.mode == "dup" and f["copy"] is not None:
            dst.sendall(f["copy"])
            if a.proto == "http" and d == "c2s":
                # The server answers twice: queue the method once more.
                last = conn.methods[-1] if conn.methods else b"GET"
                conn.methods.append(last)
            f["copy"] = None
            return True
        if a.mode in ("truncate", "stall") and not f["done"]:
            # Shorter than k: the cut comes at its end.
            return self.cut(conn, d, f, raw_base)
        return True

    def stall(self, conn):
        """Forward nothing more; return once either peer hangs up."""
        p = select.poll()
        ev = select.POLLRDHUP | select.POLLHUP | select.POLLERR
        p.register(conn.client, ev)
        p.register(conn.upstream, ev)
        while not conn.dead:
            if p.poll(200):
                break
        conn.kill()

    # ------------------------------------------------------------------ accept

    def serve(self, lsock, target):
        cid = 0
        while True:
            try:
                client, _ = lsock.accept()
            except OSError:
                time.sleep(0.05)  # out of descriptors: let connections end
                continue
            cid += 1
            try:
                up = socket.create_connection(target, timeout=10)
            except OSError as e:
                sys.stderr.write("mitm: connect %s:%d: %s\n" % (target[0], target[1], e))
                client.close()
                continue
            up.settimeout(None)
            for s in (client, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Conn(cid, client, up)
            with self.stats.lock:
                self.stats.connections += 1
                self.stats.dirty = True
            for d in ("c2s", "s2c"):
                threading.Thread(target=self.pump, args=(conn, d), daemon=True).start()


def main():
    ap = argparse.ArgumentParser(description="a TCP proxy that damages traffic")
    ap.add_argument("--listen", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--proto", choices=("raw", "railio", "http"), default="raw")
    ap.add_argument("--mode", choices=("pass", "flip", "truncate", "stall", "dup", "delay"),
                    default="pass")
    ap.add_argument("--dir", choices=("c2s", "s2c"), default="s2c")
    ap.add_argument("--nth", type=int, default=1)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--offset", type=int, default=None)
    ap.add_argument("--delay-ms", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--summary", default=None)
    a = ap.parse_args()
    if a.nth < 1:
        die("--nth: must be 1 or more")
    if a.count < 0:
        die("--count: must be 0 (every message) or more")
    if a.offset is not None and a.offset < 0:
        die("--offset: must be 0 or more")
    if a.delay_ms < 0:
        die("--delay-ms: must be 0 or more")
    if a.seed < 0:
        die("--seed: must be 0 or more")
    lhost, lport = hostport(a.listen, "--listen")
    if lhost != "127.0.0.1":
        die("--listen: only 127.0.0.1 is allowed")
    target = hostport(a.target, "--target")
    if not is_loopback(target[0]):
        die("--target: only a loopback address is allowed")

    px = Proxy(a)
    ppid = os.getppid()

    def on_signal(signum, frame):
        try:
            px.stats.write()
        finally:
            os._exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((lhost, lport))
    lsock.listen(512)
    px.stats.write()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % lsock.getsockname()[1])
    os.replace(tmp, a.port_file)

    def watchdog():
        # The parent is gone (a test killed without stopping the proxy): its
        # files go with it, and their directory when that leaves it empty.
        while os.getppid() == ppid:
            time.sleep(0.5)
        for path in (a.port_file, a.summary):
            if not path:
                continue
            for f in (path, path + ".tmp"):
                try:
                    os.unlink(f)
                except OSError:
                    pass
            try:
                os.rmdir(os.path.dirname(os.path.abspath(path)))
            except OSError:
                pass
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    threading.Thread(target=px.stats.writer, daemon=True).start()
    px.serve(lsock, target)


if __name__ == "__main__":
    main()
