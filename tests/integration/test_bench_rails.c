/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS rails;net */
/* T_TIMEOUT 60 */
/*
 * railio bench --rails-from-harness through the real binary: 2 veth rails
 * at 200mbit (tests/harness/rails.sh), an 8 MiB object, GET and PUT, one
 * repetition. The JSON must parse and hold one verified row per direction
 * with its ceiling, goodput and per-rail bytes (every rail used, the bytes
 * adding up to the object); the SVG must be well-formed XML with one
 * goodput bar per row; and the bench's namespaces must be gone when it
 * returns. Rates are not checked here (test_rails does that).
 *
 * Needs root (network namespaces); skips otherwise. Bad arguments are
 * checked without root.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"
#include "tlib.h"

static const char *dir_of(const char *env, const char *dflt)
{
    const char *v = getenv(env);
    return v && *v ? v : dflt;
}

#define run t_sh

static const char check_py[] =
    "import json, sys, xml.etree.ElementTree as ET\n"
    "d = json.load(open(sys.argv[1]))\n"
    "assert d['bench'] == 'rails', d['bench']\n"
    "size = d['setup']['object_bytes']\n"
    "assert size == 8 << 20, size\n"
    "rows = d['rows']\n"
    "assert [r['dir'] for r in rows] == ['get', 'put'], [r['dir'] for r in rows]\n"
    "for r in rows:\n"
    "    assert r['ok'] and r['error'] == '', r\n"
    "    assert r['rails'] == 2 and r['rates'] == ['200mbit', '200mbit'], r\n"
    "    assert r['depth'] == 4 and r['conns'] == 1, r\n"
    "    assert r['ceiling_mbit'] > 0 and len(r['ceiling_rail_mbit']) == 2, r\n"
    "    assert r['goodput_mbit'] > 0 and r['ratio'] > 0, r\n"
    "    assert len(r['rail_bytes']) == 2 and min(r['rail_bytes']) > 0, r['rail_bytes']\n"
    "    assert sum(r['rail_bytes']) == size, r['rail_bytes']\n"
    "    assert len(r['runs']) == 1 and r['runs'][0]['ok'], r['runs']\n"
    "    assert r['verdict'] in ('none', 'network', 'storage', 'software'), r['verdict']\n"
    "    assert r['stats']['bytes'] == size, r['stats']['bytes']\n"
    "root = ET.parse(sys.argv[2]).getroot()\n"
    "assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag\n"
    "bars = [e for e in root.iter('{http://www.w3.org/2000/svg}rect')\n"
    "        if e.get('fill') == '#2f6db5' and e.find('{http://www.w3.org/2000/svg}title')"
    " is not None]\n"
    "assert len(bars) == 2, len(bars)\n"
    "print('bench json and svg ok')\n";

TEST(two_rails_json_and_svg)
{
    const char *src = dir_of("T_SOURCE_DIR", "."), *bld = dir_of("T_BUILD_DIR", "build");
    char dir[] = "/tmp/rio-bench-rails-test-XXXXXX", path[512];
    FILE *f;
    int st;

    if (geteuid() != 0)
        T_SKIP("the rails bench needs root (network namespaces, veth, tc)");
    st = run("bash %s/tests/harness/rails.sh check", src);
    if (st == 77)
        T_SKIP("network namespaces are not available on this machine");
    T_EQ(st, 0);
    if (run("command -v python3 >/dev/null") != 0)
        T_FAIL("python3 is needed to check the JSON and SVG (scripts/install-deps.sh)");
    T_NOTNULL(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/check.py", dir);
    f = fopen(path, "w");
    T_NOTNULL(f);
    fputs(check_py, f);
    T_EQ(fclose(f), 0);

    /* exec: the bench runs as the shell's pid, written first, so its
     * namespaces (rio-c-PID, rio-s-PID) can be looked for afterwards. */
    st = run("sh -c 'echo $$ >%s/pid; exec %s/railio bench --rails-from-harness 2 --rate 200mbit "
             "--size 8M --dir get,put --reps 1 --ceiling-secs 1 --harness "
             "%s/tests/harness/rails.sh --json --svg %s/b.svg >%s/b.json 2>%s/b.err'",
             dir, bld, src, dir, dir, dir);
    if (st != 0) {
        run("cat %s/b.err %s/b.json >&2", dir, dir);
        T_FAIL("railio bench exited with %d", st);
    }
    st = run("python3 %s/check.py %s/b.json %s/b.svg", dir, dir, dir);
    if (st != 0) {
        run("cat %s/b.json >&2", dir);
        T_FAIL("the bench's JSON or SVG is not right (status %d)", st);
    }
    T_EQ(run("ip netns list | grep -q -E \"^rio-[cs]-$(cat %s/pid)( |$)\"", dir), 1);
    T_EQ(run("rm -rf %s", dir), 0);
}

TEST(bad_arguments)
{
    const char *bld = dir_of("T_BUILD_DIR", "build");
    /* A few, not every one: each run of a sanitized binary pays
     * LeakSanitizer's exit scan (about a second here). */
    const char *bad[] = {"2 --rate fast", "2 --rate 1gbit --dir sideways", "2 --conns 99", "17"};

    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        T_EQ(run("%s/railio bench --rails-from-harness %s 2>/dev/null", bld, bad[i]), 2);
    T_EQ(run("%s/railio bench --rails-from-harness 2 --help >/dev/null", bld), 0);
}
