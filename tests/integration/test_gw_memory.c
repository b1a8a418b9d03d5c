/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 240 */
/*
 * The gateway's budget for body buffers (--s3-memory, docs/gateway.md,
 * "Memory"): the windows of the writers of PUTs in flight and of the
 * readers of GETs in flight are held together to the budget, those of one
 * client address to a quarter of it. Before, every PutObject that sent a
 * little of its body and stalled held a writer (200 of them: 877 MB of
 * RSS) and every GetObject whose client read nothing held a prefetch ring,
 * up to --s3-max-conns (1024) of each. Now the next one past the budget or
 * past its address's share is answered 503 SlowDown with Retry-After while
 * another address still gets room, the room comes back when they end, and
 * a PUT or GET larger than the share still goes through (a request takes
 * its window, not its object).
 */
#include "gw_util.h"

/* The script's helpers: conn(src) from a source address, metric(name)
 * from /metrics, head(c) a response's head, answer(c, h) its body, a
 * bucket bm made, N the size of the objects (larger than the share). */
#define MEM_PY                                                                                     \
    "import socket, sys, time, re, urllib.request\n"                                               \
    "host, port = sys.argv[1].split('//')[1].split(':'); port = int(port)\n"                       \
    "d = sys.argv[4]\n"                                                                            \
    "murl = 'http://' + open(d + '/maddr').read().strip() + '/metrics'\n"                          \
    "N = 64 << 20\n"                                                                               \
    "def conn(src='127.0.0.1'):\n"                                                                 \
    "    return socket.create_connection((host, port), timeout=60, source_address=(src, 0))\n"     \
    "def metric(name):\n"                                                                          \
    "    t = urllib.request.urlopen(murl, timeout=10).read().decode()\n"                           \
    "    m = re.search('^' + re.escape(name) + r' (\\d+)$', t, re.M)\n"                            \
    "    return int(m.group(1)) if m else None\n"                                                  \
    "def head(c):\n"                                                                               \
    "    h = b''\n"                                                                                \
    "    while b'\\r\\n\\r\\n' not in h:\n"                                                        \
    "        x = c.recv(65536)\n"                                                                  \
    "        if not x: break\n"                                                                    \
    "        h += x\n"                                                                             \
    "    return h\n"                                                                               \
    "def answer(c, h):\n"                                                                          \
    "    hd, _, body = h.partition(b'\\r\\n\\r\\n')\n"                                             \
    "    m = re.search(rb'(?im)^content-length: *(\\d+)', hd)\n"                                   \
    "    n = int(m.group(1)) if m else 0\n"                                                        \
    "    body = bytearray(body)\n"                                                                 \
    "    while len(body) < n:\n"                                                                   \
    "        x = c.recv(1 << 20)\n"                                                                \
    "        if not x: break\n"                                                                    \
    "        body += x\n"                                                                          \
    "    return hd, bytes(body)\n"                                                                 \
    "def refused(c, h):\n"                                                                         \
    "    hd, body = answer(c, h)\n"                                                                \
    "    assert b' 503 ' in hd.split(b'\\r\\n')[0], hd\n"                                          \
    "    assert re.search(rb'(?im)^retry-after: *1\\r?$', hd), hd\n"                               \
    "    assert b'<Code>SlowDown</Code>' in body, body\n"                                          \
    "def wait_idle():\n"                                                                           \
    "    for i in range(100):\n"                                                                   \
    "        if metric('railiod_s3_memory_held_bytes') == 0: return\n"                             \
    "        time.sleep(0.1)\n"                                                                    \
    "    raise AssertionError('room not given back: %s' % "                                        \
    "metric('railiod_s3_memory_held_bytes'))\n"                                                    \
    "s = conn(); s.sendall(b'PUT /bmem HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: "                \
    "0\\r\\n\\r\\n')\n"                                                                            \
    "assert b' 200 ' in head(s); s.close()\n"                                                      \
    "data = bytes(range(256)) * (N // 256)\n"                                                      \
    "def put_big():\n"                                                                             \
    "    c = conn()\n"                                                                             \
    "    c.sendall(b'PUT /bmem/big HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n\\r\\n' % "  \
    "N)\n"                                                                                         \
    "    c.sendall(data)\n"                                                                        \
    "    hd, body = answer(c, head(c)); c.close()\n"                                               \
    "    assert b' 200 ' in hd.split(b'\\r\\n')[0], (hd, body)\n"

/* Start the gateway with --s3-memory memory (and, fast, the rates of
 * RAILIOD_TEST_XML_RATE: 4 MiB/s from 1 s on, 2 s of silence at most), run
 * the script py against it (MEM_PY's helpers; "ok" at its end), stop it. */
static void mem_run(const char *memory, int fast, const char *py)
{
    const char *extra[] = {"--s3-memory", memory, NULL};
    struct gw g;

    if (fast)
        setenv("RAILIOD_TEST_XML_RATE", "4194304:1:2", 1);
    gw_start(&g, NULL, extra);
    unsetenv("RAILIOD_TEST_XML_RATE");
    t_write_file(gw_path(&g, "maddr"), g.e.metrics, strlen(g.e.metrics));
    gw_python(&g, py, "-", "-", "ok");
    gw_stop(&g);
}

/* Stalled PUTs: each sends its head with Expect: 100-continue (the 100
 * goes out once the request has its room) and 64 KiB of a 64 MiB body. */
static const char stalled_puts_py[] =
    MEM_PY "def put_start(src, key):\n"
           "    c = conn(src)\n"
           "    c.sendall(b'PUT /bmem/%s HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n'\n"
           "              b'Expect: 100-continue\\r\\n\\r\\n' % (key.encode(), N))\n"
           "    h = head(c)\n"
           "    if b' 100 ' in h.split(b'\\r\\n')[0]:\n"
           "        c.sendall(data[:65536])\n"
           "        return c, None\n"
           "    return c, h\n"
           "held = []\n"
           "for k in range(40):\n"
           "    c, h = put_start('127.0.0.1', 'a%d' % k)\n"
           "    if h is not None: break\n"
           "    held.append(c)\n"
           "assert h is not None, 'one address held 40 stalled PUTs'\n"
           "refused(c, h); c.close()\n"
           "print('one address: %d stalled PUTs held, %s bytes' % (len(held), "
           "metric('railiod_s3_memory_held_bytes')))\n"
           "c, h = put_start('127.0.0.2', 'b')\n"
           "assert h is None, ('another address got no room', h)\n"
           "held.append(c)\n"
           "for i in range(3, 40):\n"
           "    c, h = put_start('127.0.0.%d' % i, 'c%d' % i)\n"
           "    if h is not None: break\n"
           "    held.append(c)\n"
           "assert h is not None, 'the budget never refused'\n"
           "refused(c, h); c.close()\n"
           "budget = metric('railiod_s3_memory_budget_bytes')\n"
           "assert budget == 64 << 20, budget\n"
           "assert metric('railiod_s3_memory_share_bytes') == 16 << 20\n"
           "assert metric('railiod_s3_memory_held_bytes') <= budget\n"
           "assert metric('railiod_s3_memory_refused_total{reason=\"address\"}') >= 1\n"
           "assert metric('railiod_s3_memory_refused_total{reason=\"budget\"}') >= 1\n"
           "print('%d addresses held %s bytes' % (i - 1, metric('railiod_s3_memory_held_bytes')))\n"
           "for c in held: c.close()\n"
           "wait_idle()\n"
           "put_big()\n"
           "wait_idle()\n"
           "assert metric('railiod_s3_memory_held_peak_bytes') <= budget\n"
           "print('ok')\n";

TEST(stalled_puts_bounded)
{
    mem_run("64M", 0, stalled_puts_py);
}

/* Slow readers: each GET of a 64 MiB object reads its head and no more. */
static const char slow_gets_py[] =
    MEM_PY "put_big()\n"
           "wait_idle()\n"
           "def get_start(src):\n"
           "    c = conn(src)\n"
           "    c.sendall(b'GET /bmem/big HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
           "    h = head(c)\n"
           "    return c, h\n"
           "def get_whole(src):\n"
           "    c, h = get_start(src)\n"
           "    hd, body = answer(c, h); c.close()\n"
           "    assert b' 200 ' in hd.split(b'\\r\\n')[0], hd\n"
           "    assert body == data, 'the GET gave other bytes'\n"
           "held = []\n"
           "for k in range(40):\n"
           "    c, h = get_start('127.0.0.1')\n"
           "    if b' 200 ' not in h.split(b'\\r\\n')[0]: break\n"
           "    held.append(c)\n"
           "assert b' 200 ' not in h.split(b'\\r\\n')[0], 'one address held 40 slow GETs'\n"
           "refused(c, h); c.close()\n"
           "print('one address: %d slow GETs held, %s bytes' % (len(held), "
           "metric('railiod_s3_memory_held_bytes')))\n"
           "get_whole('127.0.0.2')\n"
           "for i in range(3, 40):\n"
           "    c, h = get_start('127.0.0.%d' % i)\n"
           "    if b' 200 ' not in h.split(b'\\r\\n')[0]: break\n"
           "    held.append(c)\n"
           "refused(c, h); c.close()\n"
           "assert metric('railiod_s3_memory_held_bytes') <= 64 << 20\n"
           "for c in held: c.close()\n"
           "wait_idle()\n"
           "get_whole('127.0.0.1')\n"
           "wait_idle()\n"
           "print('ok')\n";

TEST(slow_gets_bounded)
{
    mem_run("64M", 0, slow_gets_py);
}

/* A copy (CopyObject, UploadPartCopy) holds a reader's ring and a
 * writer's slots for its whole length, as a GET and a PUT do: with the
 * budget taken by stalled PUTs of other addresses it is answered 503
 * SlowDown, and once room is back it is served and gives its room back.
 * Before, a copy took nothing: every connection copying a large object
 * held both windows outside the budget. */
static const char copies_py[] = MEM_PY
    "put_big()\n"
    "wait_idle()\n"
    "def copy(src, dst, part=False):\n"
    "    c = conn(src)\n"
    "    q = '?partNumber=1&uploadId=' + upload if part else ''\n"
    "    c.sendall(b'PUT /bmem/%s%s HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\n'\n"
    "              b'x-amz-copy-source: /bmem/big\\r\\n\\r\\n' % (dst.encode(), q.encode()))\n"
    "    h = head(c)\n"
    "    return c, h\n"
    "c = conn()\n"
    "c.sendall(b'POST /bmem/mp?uploads HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\n\\r\\n')\n"
    "hd, body = answer(c, head(c)); c.close()\n"
    "upload = re.search(rb'<UploadId>([^<]+)</UploadId>', body).group(1).decode()\n"
    "held = []\n"
    "for i in range(2, 40):\n"
    "    c = conn('127.0.0.%d' % i)\n"
    "    c.sendall(b'PUT /bmem/s%d HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n'\n"
    "              b'Expect: 100-continue\\r\\n\\r\\n' % (i, N))\n"
    "    h = head(c)\n"
    "    if b' 100 ' not in h.split(b'\\r\\n')[0]: break\n"
    "    c.sendall(data[:65536]); held.append(c)\n"
    "refused(c, h); c.close()\n"
    "for part in (False, True):\n"
    "    c, h = copy('127.0.0.1', 'mp' if part else 'copy', part)\n"
    "    refused(c, h); c.close()\n"
    "for c in held: c.close()\n"
    "wait_idle()\n"
    "for part in (False, True):\n"
    "    c, h = copy('127.0.0.1', 'mp' if part else 'copy', part)\n"
    "    hd, body = answer(c, h); c.close()\n"
    "    assert b' 200 ' in hd.split(b'\\r\\n')[0], (hd, body)\n"
    "    wait_idle()\n"
    "assert metric('railiod_s3_memory_held_peak_bytes') <= 64 << 20\n"
    "print('ok')\n";

TEST(copies_take_room)
{
    mem_run("64M", 0, copies_py);
}

/* CompleteMultipartUpload, where its backend cannot compose the parts
 * (this one: none), copies them into the object: a writer's window and a
 * part's reader's ring, for the whole object's length. With the budget
 * taken by stalled PUTs of other addresses it is answered 503 SlowDown
 * (the upload stays), and once room is back it completes, small (copied
 * before the answer) or large (32 MiB and more: copied while the answer
 * keeps the connection alive), and gives its room back. Before, a Complete
 * took nothing. */
static const char complete_py[] = MEM_PY
    "def req(raw, body=b'', src='127.0.0.1'):\n"
    "    c = conn(src); c.sendall(raw + body)\n"
    "    hd, b = answer(c, head(c))\n"
    "    if re.search(rb'(?im)^transfer-encoding: *chunked', hd):\n"
    "        while not b.endswith(b'0\\r\\n\\r\\n'):\n"
    "            x = c.recv(65536)\n"
    "            if not x: break\n"
    "            b += x\n"
    "    c.close()\n"
    "    return hd, b\n"
    "def upload(key, sizes):\n"
    "    hd, b = req(b'POST /bmem/%s?uploads HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: "
    "0\\r\\n\\r\\n' % key)\n"
    "    up = re.search(rb'<UploadId>([^<]+)<', b).group(1)\n"
    "    x = b'<CompleteMultipartUpload>'\n"
    "    for i, n in enumerate(sizes):\n"
    "        hd, b = req(b'PUT /bmem/%s?partNumber=%d&uploadId=%s HTTP/1.1\\r\\nHost: x\\r\\n'\n"
    "                    b'Content-Length: %d\\r\\n\\r\\n' % (key, i + 1, up, n), data[:n])\n"
    "        assert b' 200 ' in hd.split(b'\\r\\n')[0], hd\n"
    "        e = re.search(rb'(?i)etag: *(\"[^\"]+\")', hd).group(1)\n"
    "        x += b'<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>' % (i + 1, e)\n"
    "    x += b'</CompleteMultipartUpload>'\n"
    "    return (b'POST /bmem/%s?uploadId=%s HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: "
    "%d\\r\\n\\r\\n'\n"
    "            % (key, up, len(x))) + x\n"
    "small = upload(b'small', (5 << 20, 1 << 20))\n"
    "large = upload(b'large', (8 << 20, 30 << 20))\n"
    "wait_idle()\n"
    "held = []\n"
    "for i in range(2, 40):\n"
    "    c = conn('127.0.0.%d' % i)\n"
    "    c.sendall(b'PUT /bmem/s%d HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n'\n"
    "              b'Expect: 100-continue\\r\\n\\r\\n' % (i, N))\n"
    "    h = head(c)\n"
    "    if b' 100 ' not in h.split(b'\\r\\n')[0]: break\n"
    "    c.sendall(data[:65536]); held.append(c)\n"
    "refused(c, h); c.close()\n"
    "for x in (small, large):\n"
    "    c = conn(); c.sendall(x)\n"
    "    refused(c, head(c)); c.close()\n"
    "for c in held: c.close()\n"
    "wait_idle()\n"
    "for x in (small, large):\n"
    "    hd, b = req(x)\n"
    "    assert b' 200 ' in hd.split(b'\\r\\n')[0] and b'<ETag>' in b, (hd, b)\n"
    "    wait_idle()\n"
    "print('ok')\n";

TEST(complete_copies_take_room)
{
    mem_run("64M", 0, complete_py);
}

/* Bodies holding room must keep coming while room is scarce (here by
 * RAILIOD_TEST_XML_RATE: 4 MiB/s on average from 1 s on, 2 s of silence at
 * most). A PUT of 64 MiB takes a writer's window (16 MiB: more than half
 * the budget of 24 MiB, scarce): one trickling 4 KiB every 0.25 s is closed soon
 * after the grace (libmicrohttpd sends nothing before a body is in: S3
 * would answer 400 RequestTimeout), one that stalls after 64 KiB is closed
 * after the silence, their room given back. Before, both held their
 * window for as long as they liked (a byte every 119 s), and enough of
 * them every other client's PUTs out. A PUT of 64 KiB (room plenty) sent
 * as slowly, over 4 s, is let be: answered 200. */
static const char slow_bodies_py[] = MEM_PY
    "def put_head(key, n):\n"
    "    c = conn()\n"
    "    c.sendall(b'PUT /bmem/%s HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n\\r\\n'\n"
    "              % (key.encode(), n))\n"
    "    return c\n"
    "def closed_within(c, sec):\n"
    "    c.settimeout(sec)\n"
    "    try:\n"
    "        return c.recv(65536) == b''\n"
    "    except ConnectionResetError:\n"
    "        return True\n"
    "    except socket.timeout:\n"
    "        return False\n"
    "def trickle(c, n, stop_when_closed):\n"
    "    t0 = time.time()\n"
    "    c.settimeout(0.25)\n"
    "    for i in range(n):\n"
    "        try:\n"
    "            c.sendall(data[i * 4096:(i + 1) * 4096])\n"
    "            if stop_when_closed and c.recv(65536) == b'': return time.time() - t0\n"
    "        except socket.timeout:\n"
    "            pass\n"
    "        except OSError:\n"
    "            return time.time() - t0\n"
    "    return None\n"
    "c = put_head('slow', N)\n"
    "took = trickle(c, 40, True)\n"
    "assert took is not None, 'a slow body holding scarce room was not closed'\n"
    "print('slow body closed after %.1f s' % took)\n"
    "c.close(); wait_idle()\n"
    "c = put_head('stalled', N); c.sendall(data[:65536])\n"
    "t0 = time.time()\n"
    "assert closed_within(c, 10), 'a stalled body holding scarce room was not closed'\n"
    "print('stalled body closed after %.1f s' % (time.time() - t0))\n"
    "c.close(); wait_idle()\n"
    "c = put_head('small', 65536)\n"
    "assert trickle(c, 16, False) is None\n"
    "hd, body = answer(c, head(c)); c.close()\n"
    "assert b' 200 ' in hd.split(b'\\r\\n')[0], (hd, body)\n"
    "print('ok')\n";

TEST(slow_bodies_cut_while_room_is_scarce)
{
    mem_run("24M", 1, slow_bodies_py);
}

/* An address's own share taken by its own bodies is no scarcity: the
 * budget (64 MiB) is a quarter held, nobody else waits for room. A PUT of
 * 64 MiB (its window of 16 MiB is its address's whole share) trickling
 * slower than the rate is let be. Before, a share more than half taken
 * counted as scarce: an address's parallel uploads over a slow uplink (the
 * aws CLI's 32 parts of 8 MiB, 256 MiB, the default share) were each cut
 * after the grace, with the gateway otherwise idle, and their retries, as
 * slow, never finished; cutting them gave room to no other address. */
static const char own_share_py[] = MEM_PY
    "c = conn()\n"
    "c.sendall(b'PUT /bmem/slow HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n\\r\\n' % N)\n"
    "c.settimeout(0.25)\n"
    "for i in range(12):\n"
    "    c.sendall(data[i * 4096:(i + 1) * 4096])\n"
    "    try:\n"
    "        x = c.recv(65536)\n"
    "    except socket.timeout:\n"
    "        continue\n"
    "    except OSError:\n"
    "        x = b''\n"
    "    raise AssertionError('a slow body was cut though the budget was plenty: %r' % x)\n"
    "assert metric('railiod_s3_memory_held_bytes') == 16 << 20\n"
    "c.close(); wait_idle()\n"
    "print('ok')\n";

TEST(own_share_is_not_scarcity)
{
    mem_run("64M", 1, own_share_py);
}

/* GET answers holding room must be read while room is scarce (here
 * RAILIOD_TEST_XML_RATE: 4 MiB/s on average from 1 s on). With
 * --s3-memory 24M one GET of the 64 MiB object holds 16 MiB and 64 KiB
 * (more than half: scarce); its client reading 16 KiB every 0.25 s has its
 * connection cut within seconds, the room given back, and a PUT of another
 * address then gets room. libmicrohttpd asks for more of an answer only as
 * its socket drains, so nothing on the connection's own thread saw such a
 * reader: three of them, one per address, held a 64 MiB budget for as long
 * as they read a little now and then, every other client's PUTs and GETs
 * refused 503 SlowDown. A reader as slow while room is plenty (under
 * --s3-memory 64M) is let be, and a whole GET read at once is not cut. */
static const char slow_reads_py[] = MEM_PY
    "put_big()\n"
    "wait_idle()\n"
    "scarce = metric('railiod_s3_memory_budget_bytes') < 64 << 20\n"
    "c = conn('127.0.0.2')\n"
    "c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)\n"
    "c.sendall(b'GET /bmem/big HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
    "t0 = time.time(); got = 0; closed = False\n"
    "while time.time() - t0 < 8:\n"
    "    try:\n"
    "        x = c.recv(16384)\n"
    "    except OSError:\n"
    "        x = b''\n"
    "    if not x:\n"
    "        closed = True; break\n"
    "    got += len(x); time.sleep(0.25)\n"
    "c.close()\n"
    "print('slow reader: %d bytes, closed %s after %.1f s' % (got, closed, time.time() - t0))\n"
    "if scarce:\n"
    "    assert closed, 'a slow reader holding scarce room was not cut'\n"
    "    wait_idle()\n"
    "    assert metric('railiod_s3_memory_slow_reads_cut_total') == 1\n"
    "else:\n"
    "    assert not closed, 'a slow reader was cut though room was plenty'\n"
    "    wait_idle()\n"
    "    assert metric('railiod_s3_memory_slow_reads_cut_total') == 0\n"
    "c = conn('127.0.0.3')\n"
    "c.sendall(b'GET /bmem/big HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
    "hd, body = answer(c, head(c)); c.close()\n"
    "assert b' 200 ' in hd.split(b'\\r\\n')[0] and body == data, hd\n"
    "print('ok')\n";

TEST(slow_reads_cut_while_room_is_scarce)
{
    mem_run("24M", 1, slow_reads_py);
    mem_run("64M", 1, slow_reads_py);
}

/* Behind a proxy (--s3-max-conns-per-ip 0) one address may take the whole
 * budget; --s3-memory is checked (1M at least, a size) and needs
 * --s3-listen. */
TEST(memory_option)
{
    const char *proxy[] = {"--s3-memory", "64M", "--s3-max-conns-per-ip", "0", NULL};
    char bin[512];
    struct gw g;

    gw_start(&g, NULL, proxy);
    T_EQ(
        t_sh("curl -s http://%s/metrics | grep -qx 'railiod_s3_memory_share_bytes 0'", g.e.metrics),
        0);
    T_EQ(t_sh("curl -s http://%s/metrics | grep -qx 'railiod_s3_memory_budget_bytes 67108864'",
              g.e.metrics),
         0);
    gw_stop(&g);
    srv_binary(bin, sizeof(bin));
    T_EQ(t_sh("timeout -s KILL 10 %s --s3-memory 1G 2>&1 | grep -q 'need --s3-listen'", bin), 0);
    T_EQ(t_sh("timeout -s KILL 10 %s --s3-listen 127.0.0.1:0 --s3-memory 1000 2>&1 | grep -q "
              "\"invalid value '1000' for --s3-memory\"",
              bin),
         0);
    T_EQ(t_sh("timeout -s KILL 10 %s --s3-listen 127.0.0.1:0 --s3-memory lots 2>&1 | grep -q "
              "\"invalid value 'lots' for --s3-memory\"",
              bin),
         0);
}
