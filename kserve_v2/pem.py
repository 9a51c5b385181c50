"""TLS certificate and key files loaded into an :class:`ssl.SSLContext`, with errors that say
which file is wrong and how, where OpenSSL only says "PEM lib".

Used by every transport: the stdlib, asyncio and native gRPC transports build their context
in :meth:`kserve_v2.transport.sockets.TLSConfig.context` (with :func:`load_cert_chain`, and
:func:`load_ca` to say what is wrong with a CA file); the grpcio transport hands grpcio the
files' bytes, which grpcio would only log a complaint about before failing to connect, so the
channel configuration checks them first with :func:`check_tls_files`.

Example::

    ctx = ssl.create_default_context()
    load_cert_chain(ctx, "client.pem", "client.key")  # InvalidInputError naming a bad file
"""

from __future__ import annotations

import os
import ssl
from typing import Union

from kserve_v2.errors import InvalidInputError

__all__ = ["check_tls_files", "load_ca", "load_cert_chain"]

StrPath = Union[str, "os.PathLike[str]"]


def _name(path: StrPath | None) -> str | None:
    return None if path is None else os.fspath(path)


def _not_pem(what: str, path: StrPath | None, kind: str) -> InvalidInputError:
    return InvalidInputError(f"TLS {what} {_name(path)!r} is not a PEM {kind}", value=path)


def _unreadable(what: str, path: StrPath | None, exc: OSError) -> InvalidInputError:
    return InvalidInputError(
        f"cannot read TLS {what} {_name(path)!r}: {exc.strerror or exc}", value=path
    )


def load_ca(ctx: ssl.SSLContext, ca_file: StrPath | None, ca_dir: StrPath | None = None) -> None:
    """Trust the CA certificates of ``ca_file`` (PEM) and ``ca_dir`` (read at handshakes)."""
    try:
        ctx.load_verify_locations(cafile=ca_file, capath=ca_dir)
    except ssl.SSLError as exc:
        if ca_file is None:
            raise InvalidInputError(f"cannot set up TLS: {exc}", value=ca_dir) from exc
        raise _not_pem("ca_file", ca_file, "certificate") from exc
    except OSError as exc:
        if ca_file is None:
            raise _unreadable("ca_dir", ca_dir, exc) from exc
        raise _unreadable("ca_file", ca_file, exc) from exc


def load_cert_chain(
    ctx: ssl.SSLContext,
    cert_file: StrPath,
    key_file: StrPath | None = None,
    key_password: str | None = None,
) -> None:
    """Present the client certificate of ``cert_file`` (its key in ``key_file``, else in
    ``cert_file`` too)."""
    for what, path in (("cert_file", cert_file), ("key_file", key_file)):
        if path is not None and not os.path.isfile(path):
            # ssl's own OSError names no file.
            raise _unreadable(what, path, FileNotFoundError(2, "no such file"))
    try:
        ctx.load_cert_chain(cert_file, key_file, key_password)
    except ssl.SSLError as exc:
        raise _cert_chain_error(exc, cert_file, key_file, key_password) from exc
    except OSError as exc:
        raise InvalidInputError(f"cannot set up TLS: {exc}", value=cert_file) from exc


def _cert_chain_error(
    exc: ssl.SSLError, cert: StrPath, key: StrPath | None, password: str | None
) -> InvalidInputError:
    """Which file of ``load_cert_chain`` failed, and why."""
    if exc.reason == "KEY_VALUES_MISMATCH":
        key = key if key is not None else cert
        return InvalidInputError(
            f"TLS key_file {_name(key)!r} is not the key of cert_file {_name(cert)!r}",
            value=key,
        )
    # The certificate parses on its own when a trust store takes it.
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=cert)
    except ssl.SSLError:
        return _not_pem("cert_file", cert, "certificate")
    except OSError:
        pass  # read a moment ago: the key is the likelier culprit
    if key is None:
        return InvalidInputError(
            f"TLS cert_file {_name(cert)!r} has no PEM private key in it; give key_file",
            value=cert,
        )
    wrong_password = " (or its password is wrong)" if password is not None else ""
    return _not_pem("key_file", key, "private key" + wrong_password)


def check_tls_files(
    ca_file: StrPath | None = None,
    cert_file: StrPath | None = None,
    key_file: StrPath | None = None,
    key_password: str | None = None,
) -> None:
    """Raise :class:`InvalidInputError` naming the first of the files that cannot be read or
    is not PEM (or a key that is not the certificate's)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca_file is not None:
        load_ca(ctx, ca_file)
    if cert_file is not None:
        load_cert_chain(ctx, cert_file, key_file, key_password)
