/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pki_util.h: certificates for the TLS tests, made with the openssl(1)
 * command in a directory: a CA, a server certificate it signs (for
 * 127.0.0.1 and localhost) with its key, and a second CA that signs
 * nothing. Skips the test when openssl(1) is not there.
 *
 *     struct t_pki p;
 *     t_make_pki(dir, &p);   // p.ca, p.cert, p.key, p.other_ca
 */
#ifndef RIO_TEST_PKI_UTIL_H
#define RIO_TEST_PKI_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "t.h"

struct t_pki {
    char ca[512], cert[512], key[512], other_ca[512], other_key[512];
};

static inline void t_make_pki(const char *dir, struct t_pki *p)
{
    char cmd[2048];
    int r;

    if (system("openssl version >/dev/null 2>&1") != 0)
        T_SKIP("no openssl command (Debian package openssl) to make certificates");
    snprintf(p->ca, sizeof(p->ca), "%s/ca.pem", dir);
    snprintf(p->cert, sizeof(p->cert), "%s/srv.pem", dir);
    snprintf(p->key, sizeof(p->key), "%s/srv.key", dir);
    snprintf(p->other_ca, sizeof(p->other_ca), "%s/other-ca.pem", dir);
    snprintf(p->other_key, sizeof(p->other_key), "%s/other-ca.key", dir);
    snprintf(cmd, sizeof(cmd),
             "cd %s && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout ca.key -out ca.pem -days 2 -subj /CN=railio-test-ca "
             "-addext basicConstraints=critical,CA:TRUE 2>/dev/null && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=railio-other-ca "
             "-addext basicConstraints=critical,CA:TRUE 2>/dev/null && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout srv.key -out srv.csr -subj /CN=localhost 2>/dev/null && "
             "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' "
             "> srv.ext && "
             "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out srv.pem -days 2 -extfile srv.ext 2>/dev/null",
             dir);
    r = system(cmd);
    if (r != 0)
        T_FAIL("making certificates: exit %d", r);
}

/* The files t_make_pki left in dir. */
static inline void t_pki_remove(const char *dir)
{
    static const char *const files[] = {"ca.key",       "ca.pem",       "ca.srl",
                                        "other-ca.key", "other-ca.pem", "srv.key",
                                        "srv.csr",      "srv.ext",      "srv.pem"};
    char path[512];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
}

#endif
