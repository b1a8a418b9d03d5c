#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A scripted S3-like HTTP server that misbehaves on request, for railio's
s3:// and http:// transport tests. Standard library only.

    s3fault.py --port-file FILE [--owner PID]

Listens on 127.0.0.1 on a free port, writes the port to FILE once it accepts
connections, and serves until killed (or until process PID is gone). It
speaks enough S3 for railio: HEAD/GET (with Range and If-Match), PUT,
DELETE, multipart (POST ?uploads, PUT ?partNumber&uploadId, POST ?uploadId,
DELETE ?uploadId, GET /BUCKET?uploads, HEAD/GET ?partNumber=N (206, the part's
range and x-amz-mp-parts-count), ListObjectsV2: GET /BUCKET?list-type=2,
whose answer lies in a bucket named lie-<kind>, see list_v2). Signatures are not checked;
Content-MD5 is (400 BadDigest).

Faults are chosen by the object key: a key whose first segment is
F_<kind>_<count> (e.g. "F_503_2/obj") gets <kind> on its first <count>
ranged GETs (or PUT bodies, for the put* kinds); count 0 means every time.
The object is stored under the full key as usual. Kinds:

  trunc      206 with the right headers, half the body, then close
  reset      206 with the right headers, half the body, then TCP RST
  stall      206 with the right headers, a few bytes, then silence (60 s)
  nothing    close the connection without answering
  slowget    answered as usual, 350 ms late
  503        503 ServiceUnavailable (XML error body)
  slowdown   503 SlowDown
  429        429 TooManyRequests
  busyflip   503 SlowDown, then every later ranged GET as getflip (a
             failure the server answered, then others it did not)
  200        200 with the whole object instead of the range
  onetail    206 with the right Content-Range, no Content-Length, and
             100 bytes more than the range before the close
  onexxh2    206 as usual but x-amz-meta-railio-xxh given twice over
  empty200   200 with the object's headers and Content-Length 0, no body
             (a proxy that serves a cached empty answer)
  norange    206 without Content-Range
  badrange   206 whose Content-Range starts one byte late (body is right)
  overrun    206 with the right Content-Range but 100 bytes too many
  getflip    206 with the right headers and length, one bit of the body
             flipped (damaged in flight): only the chunk's xxh3 sees it
  etag       replace the object (new bytes, new ETag) before answering, so
             this and later reads of the old ETag get 412
  put503     PUT (part or object): 503 after reading the body
  putreset   PUT: read part of the body, then TCP RST
  putdigest  PUT: 400 BadDigest
  putetag    PUT: stored whole, but the ETag answered is the MD5 of other
             bytes (as if the part had been damaged in flight)
  putkms     PUT: stored whole, answered as S3 answers under SSE-KMS: an ETag
             that is no MD5 of the bytes, with x-amz-server-side-encryption:
             aws:kms
  putflip    PUT: one bit of the body flipped before any check (damaged in
             flight): Content-MD5, a checked CRC32C or a signed SHA-256
             refuses it, else it
             is stored and its ETag is the MD5 of the damaged bytes
  501        501 NotImplemented (not retryable: the server cannot do it)
  408        408 RequestTimeout (retryable, and no fault of the path)
  hugehead   HEAD (no object needed): railio metadata claiming
             Content-Length 2^64 - 1 and a chunk of 2^63 bytes; a ranged
             GET of it: 206, the same metadata, Content-Range
             bytes A-B/2^64 - 1 and B - A + 1 zero bytes
  longhead   HEAD (no object needed): a 1 MiB header line
  headshort  bare, and every HEAD of the object (not of ?partNumber) says
             1000 bytes fewer than it has; its GETs as usual
  headzero   every HEAD of the object: its headers, but Content-Length: 0
             (a proxy that zeroes a HEAD's length: it has no body); its
             GETs as usual
  nosums     every HEAD and GET: the object's x-amz-meta-railio-xxh (its
             chunk checksums) left out, as a proxy that drops metadata would
  bare       every HEAD and GET: the x-amz-meta-railio-* headers left out (an
             object railio wrote looks like one it did not: its ETag alone
             vouches for it)
  bareflip   bare, and getflip on the first <count> ranged GETs
  barenoparts  bare, and ?partNumber ignored (the whole object, no part
             count), as radosgw 16 answers
  barekms    bare, and the object's ETag "MD5-N" of other bytes with
             x-amz-server-side-encryption: aws:kms, as S3 answers for an
             object uploaded in parts and encrypted with SSE-KMS ("-1" for
             one put whole)
  barepartstall  bare, and a HEAD ?partNumber answered as headstall does
  barebadcount  bare, and ?partNumber answered with an x-amz-mp-parts-count
             no S3 object has (99999)
  barepart503  bare, the first <count> HEADs ?partNumber answered 503
             SlowDown (a busy server), and every ranged GET with a bit
             flipped as getflip does
  crc64      bare, and a HEAD or GET of the whole object asked with
             x-amz-checksum-mode: ENABLED answered with the object's
             x-amz-checksum-crc64nvme (FULL_OBJECT), as S3 keeps for every
             object; crc32 and crc32c the same with those
  crc64flip  crc64, and getflip on the first <count> ranged GETs
  crc64lie   crc64, but the CRC-64/NVME of other bytes
  crcflipslow  crc64flip, and every later ranged GET answered 350 ms late
  crcweak    crc64, and a weak ETag (W/"..."), as a proxy that compresses
             gives: its validator is the Last-Modified date alone
  crccomp    bare, and a composite x-amz-checksum-crc32 ("...-3", type
             COMPOSITE), which checks nothing alone
  deny       every HEAD (no body) and GET (S3's XML, AccessDenied) answered
             403, as to wrong credentials
  ckdenied   bare, and a HEAD that asks x-amz-checksum-mode answered 403 (S3's
             answer to whoever may not decrypt an SSE-KMS object's checksum)
  goog       bare, and on every HEAD and GET (ranged too) an x-goog-hash
             with the object's crc32c and md5, as Google Cloud Storage
             sends; googlie the crc32c of other bytes; googgz with
             x-goog-stored-content-encoding: gzip (the hash is of bytes
             other than those served: not to be checked by it), its hash
             and (put whole) its ETag those of the stored bytes, which
             here are the served ones each XOR 0x5A
  bareodd    bare, and an object completed from 3 or more parts shown as
             uploaded in parts of other sizes: 1000 bytes moved from part 3
             to part 2 (parts 1 and N as they were), its ETag theirs
  bareodd503  bareodd, and the first <count> HEADs ?partNumber of a part
             other than the first and the last (those asked only when the
             MD5 cut at part 1's size does not match) answered 503 SlowDown
  kmsetag    every HEAD and GET: the ETag the MD5 of other bytes and
             x-amz-server-side-encryption: aws:kms, as S3 answers for an
             object encrypted with SSE-KMS (its ETag is no MD5 of its bytes)
  lieetag    every HEAD and GET: the ETag the MD5 of other bytes, nothing
             else said (a server whose ETags are not MD5s, or one that lies)
  head503    HEAD: 503 (no body), the object untouched
  headstall  HEAD: the status line, then a header trickled at 2 bytes a
             second for 30 s (too fast for a stall timeout)
  complete503  CompleteMultipartUpload: 503 ServiceUnavailable, the upload
             left as it was (not completed)
  completelost CompleteMultipartUpload: completed, then the connection reset
             without an answer (an answer lost on the way back)
  completegone CompleteMultipartUpload: completed, the object then removed
             (as by another client's DELETE), the connection reset without
             an answer: nothing can tell whether the complete took effect
  completeempty  CompleteMultipartUpload: 200 with an empty body (neither
             a result nor an error), the upload left as it was
  completeslow  CompleteMultipartUpload as S3 answers one it takes long on:
             200 and its headers at once, a space every second for 4 s
             (the upload completed only then), then the result
  completequiet  CompleteMultipartUpload: nothing at all for 4 s (a server
             working on it without a word), then completed and answered
  get503     GET without a Range (a multipart object's sidecar, whose key
             starts as the object's): 503 ServiceUnavailable

An x-amz-checksum-crc32c header is counted; in a bucket whose name starts
with "ck" it is also checked (400 BadDigest when wrong), as S3 does; other
buckets ignore it, as radosgw before Squid does. A PUT's x-amz-content-sha256
that is a SHA-256 (64 hex digits, not UNSIGNED-PAYLOAD) is counted and
checked in every bucket (400 XAmzContentSHA256Mismatch when it is not the
body's), as S3 and radosgw do for signed requests.

GET /_stats answers "requests=N fired=N uploads=N objects=N completes=N heads=N
crc32c=N sha256=N md5=N" (requests: every request but these; uploads: open
multipart uploads, all buckets; completes:
CompleteMultipartUpload requests, heads: HEAD requests, whatever their answer;
crc32c: PUTs that carried x-amz-checksum-crc32c, sha256: PUTs that carried
a payload SHA-256, md5: PUTs that carried a Content-MD5).
"""

import argparse
import base64
import hashlib
import http.server
import os
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse
import zlib

LOCK = threading.Lock()
OBJECTS = {}  # (bucket, key) -> dict(data, etag, meta)
UPLOADS = {}  # upload id -> dict(bucket, key, meta, parts{n: (data, etag)})
FAULTS = {}  # (bucket, key) -> [kind, remaining (None = forever)]
STATS = {"requests": 0, "fired": 0, "completes": 0, "heads": 0, "crc32c": 0, "sha256": 0,
         "md5": 0}
NEXT_UPLOAD = [1]

FAULT_RE = re.compile(r"^F_([a-z0-9]+)_([0-9]+)(/|$)")
PUT_KINDS = ("put503", "putreset", "putdigest", "putetag", "putkms", "putflip")
HEAD_KINDS = ("hugehead", "longhead", "head503", "headstall")
COMPLETE_KINDS = ("complete503", "completelost", "completegone", "completeempty",
                  "completeslow", "completequiet")
PLAIN_GET_KINDS = ("get503",)


def md5hex(b):
    return hashlib.md5(b).hexdigest()


def _crc32c_table():
    t = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC32C_TABLE = _crc32c_table()


def crc32c_b64(b):
    """S3's x-amz-checksum-crc32c of b: the big-endian CRC32C, base64."""
    c, t = 0xFFFFFFFF, CRC32C_TABLE
    for x in b:
        c = t[(c ^ x) & 0xFF] ^ (c >> 8)
    return base64.b64encode(struct.pack(">I", c ^ 0xFFFFFFFF)).decode()


def xml_error(code, msg):
    return ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code>'
            "<Message>%s</Message></Error>" % (code, msg)).encode()


CRC_KINDS = ("crc64", "crc64flip", "crcflipslow", "crc64lie", "crcweak", "crc32", "crc32c",
             "crccomp", "goog", "googlie", "googgz", "ckdenied")
_CRC_TABLES = {}


def _crc(poly, width, data):
    """A reflected CRC with its register inverted in and out (CRC-64/NVME,
    CRC-32C): a byte at a time, for the small objects of tests."""
    t = _CRC_TABLES.get(poly)
    if t is None:
        t = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ poly if c & 1 else c >> 1
            t.append(c)
        _CRC_TABLES[poly] = t
    mask = (1 << width) - 1
    c = mask
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ mask


def googgz_stored(data):
    """The bytes a googgz object stands for as stored (gzipped, served
    decompressed): other bytes than those served, whose hashes and ETag
    GCS sends."""
    return bytes(b ^ 0x5A for b in data)


def checksum_headers(kind, data):
    """The full-object checksum headers of a crc* kind: the object's
    CRC-64/NVME (crc64, crc64flip, crcflipslow, crcweak), one of other bytes
    (crc64lie), its CRC-32 or CRC-32C, or a composite CRC-32 of three parts
    (crccomp)."""
    if kind in ("crc64", "crc64flip", "crcflipslow", "crc64lie", "crcweak"):
        v = _crc(0x9A6C9329AC4BC9B5, 64, data + (b"x" if kind == "crc64lie" else b""))
        return {"x-amz-checksum-crc64nvme": base64.b64encode(v.to_bytes(8, "big")).decode(),
                "x-amz-checksum-type": "FULL_OBJECT"}
    if kind in ("goog", "googlie", "googgz"):
        # Google Cloud Storage's, on every HEAD and GET whatever was asked
        if kind == "googgz":
            data = googgz_stored(data)
        v = _crc(0x82F63B78, 32, data + (b"x" if kind == "googlie" else b""))
        h = {"x-goog-hash": "crc32c=%s,md5=%s" % (
            base64.b64encode(v.to_bytes(4, "big")).decode(),
            base64.b64encode(hashlib.md5(data).digest()).decode())}
        if kind == "googgz":
            h["x-goog-stored-content-encoding"] = "gzip"
        return h
    if kind == "crc32c":
        v = _crc(0x82F63B78, 32, data)
        return {"x-amz-checksum-crc32c": base64.b64encode(v.to_bytes(4, "big")).decode(),
                "x-amz-checksum-type": "FULL_OBJECT"}
    v = zlib.crc32(data)
    b = base64.b64encode(v.to_bytes(4, "big")).decode()
    if kind == "crccomp":
        return {"x-amz-checksum-crc32": b + "-3", "x-amz-checksum-type": "COMPOSITE"}
    return {"x-amz-checksum-crc32": b, "x-amz-checksum-type": "FULL_OBJECT"}


def fault_for(bucket, key, put, head=False, complete=False, plain=False):
    """The fault kind to apply to this request now, or None (counts it)."""
    m = FAULT_RE.match(key)
    if not m:
        return None
    kind, count = m.group(1), int(m.group(2))
    if ((kind in PUT_KINDS) != put or (kind in HEAD_KINDS) != head
            or (kind in COMPLETE_KINDS) != complete or (kind in PLAIN_GET_KINDS) != plain):
        return None
    with LOCK:
        st = FAULTS.setdefault((bucket, key), [kind, count if count else None])
        if st[1] is not None:
            if st[1] <= 0:
                return None
            st[1] -= 1
        STATS["fired"] += 1
    return kind


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    # --- plumbing ---

    def split(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        parts = u.path.lstrip("/").split("/", 1)
        bucket = urllib.parse.unquote(parts[0])
        key = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
        return bucket, key, q

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = b""
        while len(data) < n:
            d = self.rfile.read(n - len(data))
            if not d:
                break
            data += d
        return data

    def send(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and not head:
            self.wfile.write(body)

    def err(self, status, code, msg=""):
        self.send(status, xml_error(code, msg), {"Content-Type": "application/xml"})

    def rst(self):
        """Close with a TCP reset (SO_LINGER 0)."""
        try:
            self.wfile.flush()
        except OSError:
            pass
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def trickle_head(self, status):
        """The status line, then one header byte every half second for 30 s:
        never slow enough for a stall timeout of a few seconds."""
        self.wfile.write(b"HTTP/1.1 " + status + b"\r\nX-Slow: ")
        for _ in range(60):
            try:
                self.wfile.write(b"a")
                self.wfile.flush()
            except OSError:
                break
            time.sleep(0.5)
        self.close_connection = True

    def obj_headers(self, o):
        h = {"ETag": o["etag"], "Accept-Ranges": "bytes",
             "Last-Modified": "Mon, 30 Nov 2026 00:00:00 GMT"}
        h.update(o["meta"])
        return h

    # --- verbs ---

    def do_HEAD(self):
        self.get(head=True)

    def do_GET(self):
        self.get(head=False)

    def get(self, head):
        bucket, key, q = self.split()
        if bucket != "_stats":
            with LOCK:
                STATS["requests"] += 1
        if bucket == "_stats":
            with LOCK:
                s = ("requests=%d fired=%d uploads=%d objects=%d completes=%d heads=%d crc32c=%d "
                     "sha256=%d md5=%d\n") % (
                    STATS["requests"], STATS["fired"], len(UPLOADS), len(OBJECTS),
                    STATS["completes"], STATS["heads"], STATS["crc32c"], STATS["sha256"],
                    STATS["md5"])
            return self.send(200, s.encode())
        if not key and "uploads" in q:
            return self.list_uploads(bucket)
        if not key and "list-type" in q and not head:
            return self.list_v2(bucket, q)
        if head:
            with LOCK:
                STATS["heads"] += 1
        hk = fault_for(bucket, key, put=False, head=True) if head else None
        if hk == "head503":
            return self.send(503, head=True)
        if hk == "headstall":
            return self.trickle_head(b"200 OK")
        if hk == "longhead":
            self.send_response(200)
            self.send_header("Content-Length", "64")
            self.send_header("X-Long", "A" * (1 << 20))
            self.end_headers()
            return
        if hk == "hugehead":
            self.send_response(200)
            for k, v in (("ETag", '"0123456789abcdef0123456789abcdef"'),
                         ("Content-Length", "18446744073709551615"),
                         ("x-amz-meta-railio-v", "1"), ("x-amz-meta-railio-id", "0123456789abcdef"),
                         ("x-amz-meta-railio-size", "18446744073709551615"),
                         ("x-amz-meta-railio-chunk", "9223372036854775808")):
                self.send_header(k, v)
            self.end_headers()
            return
        rng = self.headers.get("Range")
        hm = FAULT_RE.match(key)
        if hm and hm.group(1) == "deny":
            return self.send(403, head=True) if head else self.err(403, "AccessDenied",
                                                                  "Access Denied")
        rm = re.match(r"bytes=(\d+)-(\d+)$", rng or "")
        if not head and hm and hm.group(1) == "hugehead" and rm:
            a, b = int(rm.group(1)), min(int(rm.group(2)), int(rm.group(1)) + (1 << 24))
            self.send_response(206)
            for k, v in (("ETag", '"0123456789abcdef0123456789abcdef"'),
                         ("Content-Range", "bytes %d-%d/18446744073709551615" % (a, b)),
                         ("Content-Length", str(b - a + 1)),
                         ("x-amz-meta-railio-v", "1"), ("x-amz-meta-railio-id", "0123456789abcdef"),
                         ("x-amz-meta-railio-size", "18446744073709551615"),
                         ("x-amz-meta-railio-chunk", "9223372036854775808")):
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(bytes(b - a + 1))
            return
        with LOCK:
            o = OBJECTS.get((bucket, key))
        if o is None:
            return self.err(404, "NoSuchKey") if not head else self.send(404, head=True)
        m = re.match(r"bytes=(\d+)-(\d+)$", rng or "")
        kind = fault_for(bucket, key, put=False) if (m and not head) else None
        if not m and not head and fault_for(bucket, key, put=False, plain=True) == "get503":
            return self.err(503, "ServiceUnavailable")
        if kind == "etag":
            with LOCK:
                old = OBJECTS.get((bucket, key))
                if old is not None:
                    data = bytes(b ^ 0x5A for b in old["data"])
                    OBJECTS[(bucket, key)] = {"data": data, "etag": '"%s"' % md5hex(data),
                                              "meta": dict(old["meta"])}
                o = OBJECTS[(bucket, key)]
        data = o["data"]
        if re.match(r"F_bareodd(503)?_", key) and len(o.get("parts") or []) >= 3:
            parts = list(o["parts"])
            parts[1] += 1000
            parts[2] -= 1000
            offs = [sum(parts[:i]) for i in range(len(parts))]
            md5s = b"".join(hashlib.md5(data[a:a + n]).digest() for a, n in zip(offs, parts))
            o = dict(o, parts=parts, etag='"%s-%d"' % (md5hex(md5s), len(parts)))
        h = self.obj_headers(o)
        fm = FAULT_RE.match(key)
        if fm and fm.group(1) == "nosums":
            h = {k: v for k, v in h.items() if k.lower() != "x-amz-meta-railio-xxh"}
        if fm and fm.group(1) in ("kmsetag", "lieetag"):
            h["ETag"] = '"%s"' % md5hex(data + b"other")
            if fm.group(1) == "kmsetag":
                h["x-amz-server-side-encryption"] = "aws:kms"
        if fm and fm.group(1) in ("bare", "bareflip", "barenoparts", "barekms",
                                  "barepartstall", "bareodd", "bareodd503", "barepart503",
                                  "barebadcount", "headshort"):
            h = {k: v for k, v in h.items() if not k.lower().startswith("x-amz-meta-railio")}
        if fm and fm.group(1) in CRC_KINDS:
            h = {k: v for k, v in h.items() if not k.lower().startswith("x-amz-meta-railio")}
            if fm.group(1) == "ckdenied":
                if head and self.headers.get("x-amz-checksum-mode"):
                    return self.send(403, head=True)
            elif fm.group(1).startswith("goog"):
                h.update(checksum_headers(fm.group(1), data))
                if fm.group(1) == "googgz" and "parts" not in o:
                    h["ETag"] = '"%s"' % md5hex(googgz_stored(data))
            elif self.headers.get("x-amz-checksum-mode", "").upper() == "ENABLED" and not (
                    m and not head) and not q.get("partNumber"):
                h.update(checksum_headers(fm.group(1), data))
            if fm.group(1) == "crcweak":
                h["ETag"] = "W/" + h["ETag"]
        if fm and fm.group(1) == "barekms":
            h["ETag"] = '"%s-%d"' % (md5hex(data + b"other"), len(o.get("parts") or [data]))
            h["x-amz-server-side-encryption"] = "aws:kms"
        im = self.headers.get("If-Match")
        if im is not None and im != h["ETag"]:
            return self.err(412, "PreconditionFailed") if not head else self.send(412, head=True)
        pn = q.get("partNumber")
        if pn and not (fm and fm.group(1) == "barenoparts"):
            # Part N of an object completed from parts (206, its range and
            # the part count); an object put whole is its one part.
            parts = o.get("parts") or [len(data)]
            n = int(pn[0]) if pn[0].isdigit() else 0
            if n < 1 or n > len(parts):
                return self.err(416, "InvalidPartNumber") if not head else self.send(416, head=True)
            a = sum(parts[:n - 1])
            part = data[a:a + parts[n - 1]]
            h["Content-Range"] = "bytes %d-%d/%d" % (a, a + len(part) - 1, len(data))
            if "parts" in o:
                h["x-amz-mp-parts-count"] = str(len(parts))
            if fm and fm.group(1) == "barebadcount":
                h["x-amz-mp-parts-count"] = "99999"
            if head and fm and fm.group(1) == "barepartstall":
                return self.trickle_head(b"206 Partial Content")
            # barepart503: every part HEAD busy (its count); bareodd503: the
            # middle parts' only
            if head and fm and (fm.group(1) == "barepart503" or (
                    fm.group(1) == "bareodd503" and 1 < n < len(parts))):
                with LOCK:
                    st = FAULTS.setdefault((bucket, key, "part503"), [int(fm.group(2))])
                    busy = st[0] > 0
                    st[0] -= busy
                    STATS["fired"] += busy
                if busy:
                    return self.send(503, head=True)
            if head:
                self.send_response(206)
                for k, v in h.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(part)))
                self.end_headers()
                return
            return self.send(206, part, h)
        if head:
            self.send_response(200)
            for k, v in h.items():
                self.send_header(k, v)
            zero = fm and fm.group(1) == "headzero"
            short = 1000 if fm and fm.group(1) == "headshort" else 0
            self.send_header("Content-Length", "0" if zero else str(len(data) - short))
            self.end_headers()
            return
        if not m:
            return self.send(200, data, h)
        a, b = int(m.group(1)), int(m.group(2))
        if a >= len(data) or a > b:
            return self.err(416, "InvalidRange")
        b = min(b, len(data) - 1)
        part = data[a:b + 1]
        cr = "bytes %d-%d/%d" % (a, b, len(data))
        if kind == "slowget" or (kind is None and hm and hm.group(1) == "crcflipslow"):
            time.sleep(0.35)  # then answered as usual
            kind = None
        if kind == "nothing":
            self.connection.close()
            self.close_connection = True
            return
        if kind == "busyflip":
            kind = "slowdown"
        elif kind is None and hm and hm.group(1) == "busyflip":
            kind = "getflip"
        if kind in ("503", "slowdown", "429", "501", "408"):
            code = {"503": (503, "ServiceUnavailable"), "slowdown": (503, "SlowDown"),
                    "429": (429, "TooManyRequests"), "501": (501, "NotImplemented"),
                    "408": (408, "RequestTimeout")}[kind]
            return self.err(code[0], code[1])
        if kind == "200":
            return self.send(200, data, h)
        if kind in ("trunc", "reset", "stall"):
            self.send_response(206)
            for k, v in h.items():
                self.send_header(k, v)
            self.send_header("Content-Range", cr)
            self.send_header("Content-Length", str(len(part)))
            self.end_headers()
            cut = len(part) // 2 if kind != "stall" else min(len(part) - 1, 1000)
            self.wfile.write(part[:cut])
            self.wfile.flush()
            if kind == "trunc":
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
            elif kind == "reset":
                self.rst()
            else:
                # Silence until the client gives up (or 60 s).
                end = time.time() + 60
                self.connection.settimeout(0.2)
                while time.time() < end:
                    try:
                        if self.connection.recv(1) == b"":
                            break
                    except socket.timeout:
                        continue
                    except OSError:
                        break
                self.close_connection = True
            return
        if kind == "onetail":
            # 206 with the right Content-Range, no Content-Length (the body
            # runs to the close), and 100 bytes more than the range.
            self.send_response(206)
            for k, v in h.items():
                self.send_header(k, v)
            self.send_header("Content-Range", cr)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(part + b"\xEE" * 100)
            self.wfile.flush()
            self.close_connection = True
            return
        if kind == "onexxh2":
            # the checksum list given twice over (an xxh list of several
            # entries for an object of one chunk)
            h["Content-Range"] = cr
            for k in list(h):
                if k.lower() == "x-amz-meta-railio-xxh":
                    h[k] = h[k] + h[k]
            return self.send(206, part, h)
        if kind == "empty200":
            return self.send(200, b"", h)
        if kind == "norange":
            return self.send(206, part, h)
        if kind == "badrange":
            h["Content-Range"] = "bytes %d-%d/%d" % (a + 1, b + 1, len(data))
            return self.send(206, part, h)
        if kind in ("getflip", "bareflip", "crc64flip", "crcflipslow") or (
                hm and hm.group(1) == "barepart503"):
            h["Content-Range"] = cr
            bad = bytearray(part)
            bad[len(bad) // 2] ^= 0x10
            return self.send(206, bytes(bad), h)
        if kind == "overrun":
            h["Content-Range"] = cr
            extra = part + b"\xEE" * 100
            return self.send(206, extra, h)
        h["Content-Range"] = cr
        return self.send(206, part, h)

    def list_v2(self, bucket, q):
        """ListObjectsV2 (keys URL-encoded, tokens opaque). A bucket named
        lie-<kind> lies: emptycircle answers every page empty but not the
        last, its continuation tokens going round T1 -> T2 -> T1; notrunc
        lists its keys but leaves IsTruncated out (the token says more
        pages follow); manydirs holds no object but names 1000 pages of
        1000 common prefixes each, d0000000/ to d0999999/, in byte order
        (a bucket with a million directories, whatever the delimiter)."""
        tok = q.get("continuation-token", [""])[0]
        items, nxt = "", ""
        if bucket == "lie-emptycircle":
            nxt = "T2" if tok == "T1" else "T1"
        elif bucket == "lie-manydirs":
            page = int(tok) if tok.isdigit() else 0
            items = "".join("<CommonPrefixes><Prefix>d%07d/</Prefix></CommonPrefixes>" % i
                            for i in range(page * 1000, page * 1000 + 1000))
            nxt = str(page + 1) if page + 1 < 1000 else ""
        else:
            prefix = q.get("prefix", [""])[0]
            after = bytes.fromhex(tok).decode() if tok else q.get("start-after", [""])[0]
            mk = int(q.get("max-keys", ["1000"])[0])
            with LOCK:
                keys = sorted(k for (b, k) in OBJECTS if b == bucket and k.startswith(prefix)
                              and k > after)
                page = [(k, OBJECTS[(bucket, k)]) for k in keys[:mk]]
            for k, o in page:
                items += ("<Contents><Key>%s</Key><LastModified>2026-11-30T00:00:00.000Z"
                          "</LastModified><ETag>%s</ETag><Size>%d</Size></Contents>" % (
                              urllib.parse.quote(k, safe="/"), o["etag"].replace('"', "&quot;"),
                              len(o["data"])))
            if len(keys) > mk:
                nxt = page[-1][0].encode().hex()
        trunc = "" if bucket == "lie-notrunc" else (
            "<IsTruncated>%s</IsTruncated>" % ("true" if nxt else "false"))
        body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>%s</Name>'
                "<EncodingType>url</EncodingType>%s%s%s"
                "</ListBucketResult>" % (bucket, trunc,
                                         "<NextContinuationToken>%s</NextContinuationToken>" % nxt
                                         if nxt else "", items)).encode()
        self.send(200, body, {"Content-Type": "application/xml"})

    def list_uploads(self, bucket):
        with LOCK:
            ups = [(i, u) for i, u in UPLOADS.items() if u["bucket"] == bucket]
        items = "".join("<Upload><Key>%s</Key><UploadId>%s</UploadId></Upload>" % (u["key"], i)
                        for i, u in ups)
        body = ('<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult>'
                "<Bucket>%s</Bucket>%s</ListMultipartUploadsResult>" % (bucket, items)).encode()
        self.send(200, body, {"Content-Type": "application/xml"})

    def meta_of(self):
        return {k: v for k, v in self.headers.items() if k.lower().startswith("x-amz-meta-")}

    def check_md5(self, data):
        cm = self.headers.get("Content-MD5")
        if cm is None:
            return True
        with LOCK:
            STATS["md5"] += 1
        import base64
        return base64.b64encode(hashlib.md5(data).digest()).decode() == cm

    def do_PUT(self):
        with LOCK:
            STATS["requests"] += 1
        bucket, key, q = self.split()
        kind = fault_for(bucket, key, put=True)
        if kind == "putreset":
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(min(n // 2, 65536))
            return self.rst()
        data = self.body()
        if kind == "put503":
            return self.err(503, "ServiceUnavailable")
        # Data only: a part, or a PutObject carrying railio's chunk list (not a sidecar).
        if kind == "putflip" and data and ("uploadId" in q or "x-amz-meta-railio-xxh" in self.headers):
            data = bytes([data[0] ^ 0x01]) + data[1:]
        ck = self.headers.get("x-amz-checksum-crc32c")
        if ck is not None:
            with LOCK:
                STATS["crc32c"] += 1
            if bucket.startswith("ck") and crc32c_b64(data) != ck:
                return self.err(400, "BadDigest")
        sh = (self.headers.get("x-amz-content-sha256") or "").lower()
        if len(sh) == 64 and all(c in "0123456789abcdef" for c in sh):
            with LOCK:
                STATS["sha256"] += 1
            if hashlib.sha256(data).hexdigest() != sh:
                return self.err(400, "XAmzContentSHA256Mismatch")
        if kind == "putdigest" or not self.check_md5(data):
            return self.err(400, "BadDigest")
        etag = '"%s"' % md5hex(data)
        answer = '"%s"' % md5hex(data + b"damaged") if kind in ("putetag", "putkms") else etag
        ah = {"ETag": answer}
        if kind == "putkms":
            ah["x-amz-server-side-encryption"] = "aws:kms"
        if not key:
            return self.send(200)  # create bucket
        if "uploadId" in q:
            uid = q["uploadId"][0]
            n = int(q.get("partNumber", ["0"])[0])
            with LOCK:
                u = UPLOADS.get(uid)
                if u is None:
                    return self.err(404, "NoSuchUpload")
                u["parts"][n] = (data, etag)
            return self.send(200, b"", ah)
        with LOCK:
            OBJECTS[(bucket, key)] = {"data": data, "etag": etag, "meta": self.meta_of()}
        self.send(200, b"", ah)

    def do_POST(self):
        with LOCK:
            STATS["requests"] += 1
        bucket, key, q = self.split()
        body = self.body()
        if "uploads" in q:
            m = FAULT_RE.match(key)
            if m and m.group(1) == "createslow":  # the upload made, its answer late
                with LOCK:
                    STATS["fired"] += 1
                time.sleep(0.6)
            with LOCK:
                uid = "up%d" % NEXT_UPLOAD[0]
                NEXT_UPLOAD[0] += 1
                UPLOADS[uid] = {"bucket": bucket, "key": key, "meta": self.meta_of(), "parts": {}}
            x = ("<InitiateMultipartUploadResult><Bucket>%s</Bucket><Key>%s</Key>"
                 "<UploadId>%s</UploadId></InitiateMultipartUploadResult>" % (bucket, key, uid))
            return self.send(200, x.encode(), {"Content-Type": "application/xml"})
        if "uploadId" in q:
            uid = q["uploadId"][0]
            with LOCK:
                STATS["completes"] += 1
            kind = fault_for(bucket, key, put=False, complete=True)
            if kind == "complete503":
                return self.err(503, "ServiceUnavailable")
            if kind == "completeempty":
                return self.send(200)
            if kind == "completeslow":
                self.send_response(200)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                for _ in range(4):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(1)
            if kind == "completequiet":
                time.sleep(4)
            want = re.findall(rb"<PartNumber>(\d+)</PartNumber><ETag>([^<]*)</ETag>", body)
            with LOCK:
                u = UPLOADS.get(uid)
                if u is None:
                    return self.err(404, "NoSuchUpload")
                datas, md5s = [], b""
                for i, (n, et) in enumerate(want):
                    p = u["parts"].get(int(n))
                    if int(n) != i + 1 or p is None or p[1].encode() != et.replace(b"&quot;", b'"'):
                        return self.err(400, "InvalidPart")
                    datas.append(p[0])
                    md5s += hashlib.md5(p[0]).digest()
                data = b"".join(datas)
                etag = '"%s-%d"' % (hashlib.md5(md5s).hexdigest(), len(datas))
                OBJECTS[(u["bucket"], u["key"])] = {"data": data, "etag": etag, "meta": u["meta"],
                                                    "parts": [len(d) for d in datas]}
                del UPLOADS[uid]
            if kind == "completegone":
                with LOCK:
                    OBJECTS.pop((u["bucket"], u["key"]), None)
            if kind in ("completelost", "completegone"):
                return self.rst()
            x = ("<CompleteMultipartUploadResult><Key>%s</Key><ETag>%s</ETag>"
                 "</CompleteMultipartUploadResult>" % (key, etag.replace('"', "&quot;")))
            if kind == "completeslow":  # its headers went first: the body, then close
                self.wfile.write(x.encode())
                return
            return self.send(200, x.encode(), {"Content-Type": "application/xml"})
        self.err(400, "InvalidRequest")

    def do_DELETE(self):
        with LOCK:
            STATS["requests"] += 1
        bucket, key, q = self.split()
        self.body()
        with LOCK:
            if "uploadId" in q:
                if UPLOADS.pop(q["uploadId"][0], None) is None:
                    return self.err(404, "NoSuchUpload")
            else:
                OBJECTS.pop((bucket, key), None)
        self.send(204)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--owner", type=int, default=0)
    a = ap.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    if a.owner:
        def watch():
            while True:
                try:
                    os.kill(a.owner, 0)
                except OSError:
                    os._exit(0)
                time.sleep(0.5)
        threading.Thread(target=watch, daemon=True).start()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
