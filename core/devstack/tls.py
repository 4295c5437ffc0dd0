"""A certificate authority of the dev stack's own and one server certificate it signs, for
the brokers' SASL_SSL listeners and PostgreSQL's TLS, made with the ``openssl`` command.

The server certificate names ``127.0.0.1`` and ``localhost``, so clients verify the host
(librdkafka's default, libpq's ``sslmode=verify-full``) against the CA alone.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tenantq.errors import DevStackError

_DAYS = 825
_CURVE = "prime256v1"


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the CA's certificate (what clients trust) and key, the server's certificate
    and key, and both of the server's in one file (the brokers' PEM keystore)."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    server_keystore: Path

    @classmethod
    def under(cls, dev_home: Path) -> TlsFiles:
        root = dev_home / "tls"
        return cls(
            ca_cert=root / "ca.pem",
            ca_key=root / "ca.key",
            server_cert=root / "server.pem",
            server_key=root / "server.key",
            server_keystore=root / "server-keystore.pem",
        )

    def complete(self) -> bool:
        return all(
            path.exists()
            for path in (
                self.ca_cert,
                self.ca_key,
                self.server_cert,
                self.server_key,
                self.server_keystore,
            )
        )


def ensure_tls(dev_home: Path) -> TlsFiles:
    """The home's CA and server certificate, made once."""
    files = TlsFiles.under(dev_home)
    if files.complete():
        return files
    openssl = shutil.which("openssl")
    if openssl is None:
        raise DevStackError("`openssl` is needed to make the secure dev stack's certificates")
    root = files.ca_cert.parent
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    extensions = root / "server.ext"
    extensions.write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    request = root / "server.csr"
    key_options = ["-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{_CURVE}", "-noenc"]
    _openssl(
        openssl,
        "req", "-x509", *key_options, "-keyout", str(files.ca_key), "-out", str(files.ca_cert),
        "-days", str(_DAYS), "-subj", "/CN=tenantq dev stack CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    _openssl(
        openssl,
        "req", *key_options, "-keyout", str(files.server_key), "-out", str(request),
        "-subj", "/CN=127.0.0.1",
    )  # fmt: skip
    _openssl(
        openssl,
        "x509", "-req", "-in", str(request), "-CA", str(files.ca_cert),
        "-CAkey", str(files.ca_key), "-CAcreateserial", "-out", str(files.server_cert),
        "-days", str(_DAYS), "-extfile", str(extensions),
    )  # fmt: skip
    for path in (files.ca_key, files.server_key):
        path.chmod(0o600)
    keystore = files.server_key.read_text() + files.server_cert.read_text()
    files.server_keystore.write_text(keystore)
    files.server_keystore.chmod(0o600)
    request.unlink()
    return files


def _openssl(openssl: str, *arguments: str) -> None:
    result = subprocess.run(
        [openssl, *arguments], capture_output=True, text=True, check=False, timeout=60
    )
    if result.returncode != 0:
        raise DevStackError(f"openssl {arguments[0]} failed: {result.stderr.strip()}")
