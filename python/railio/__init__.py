# SPDX-License-Identifier: Apache-2.0
"""railio: move large objects over every path you have (Python binding).

Client(url, **options) opens a client (mock://, railio://, s3://, rados://,
file://); its calls release the GIL and take any buffer-protocol object or a
CPU torch tensor without copying it. See docs/python.md.
"""
from ._railio import (  # noqa: F401
    AccessDenied,
    BatchError,
    Cancel,
    Cancelled,
    Client,
    Error,
    GenerationChanged,
    InvalidArgument,
    NoSpace,
    NotFound,
    OutcomeUnknown,
    Timeout,
    Unavailable,
    VerifyError,
    backends,
    version,
)

try:  # stream.c's types (list entries, streaming reader and writer)
    from ._railio import Entry, Reader, Writer  # noqa: F401
except ImportError:  # pragma: no cover - a build without them
    pass

__version__ = version()

__all__ = [
    "AccessDenied", "BatchError", "Cancel", "Cancelled", "Client", "Error",
    "GenerationChanged", "InvalidArgument", "NoSpace", "NotFound", "OutcomeUnknown",
    "Timeout", "Unavailable", "VerifyError", "backends", "version",
    "Entry", "Reader", "Writer",
]
