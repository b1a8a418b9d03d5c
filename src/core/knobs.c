/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test knobs: globals that tests flip to reach states the library never
 * enters on its own. Each is declared in core/internal.h with who reads it.
 */
#include "core/internal.h"

_Atomic int rio__test_nofence = 0;
