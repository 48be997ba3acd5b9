"""The receiver's TLS 1.3 identity for one QUIC run (RFC 9001): a self-signed certificate made
when the run is accepted, in a temporary directory removed when the run ends.

Nothing is fixed in the repository: every run has a fresh ECDSA P-256 key. The receiver sends
the certificate's SHA-256 (:func:`fingerprint`) in its "accept" over the control connection;
the sender checks the certificate the QUIC handshake presents against it (pinning, as WebRTC's
DTLS does with the fingerprint in its SDP, RFC 8122), so no CA is involved and a QUIC peer
that is not this run's receiver is refused.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class RunCertificate:
    """A run's certificate and key files (PEM) and the certificate's SHA-256 (hex, of DER)."""
    directory: str
    cert_path: str
    key_path: str
    sha256: str

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def fingerprint(cert) -> str:
    """SHA-256 (lower-case hex) of a ``cryptography`` certificate's DER encoding."""
    from cryptography.hazmat.primitives.serialization import Encoding

    return hashlib.sha256(cert.public_bytes(Encoding.DER)).hexdigest()


#: A run's key folder in the temporary directory: ``tcpdelay-quic-<pid>-<random>``; the pid
#: tells a folder left by a killed receiver (:func:`remove_stale_key_dirs`) from a live one's.
KEY_DIR_PREFIX = "tcpdelay-quic-"


def remove_stale_key_dirs() -> list[str]:
    """Remove the key folders of receivers that are no longer running (killed mid-run: their
    run's private key stayed in the temporary directory). Returns the folders removed."""
    removed = []
    for d in Path(tempfile.gettempdir()).glob(f"{KEY_DIR_PREFIX}*-*"):
        pid = d.name[len(KEY_DIR_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or not d.is_dir() or d.is_symlink():
            continue
        try:
            os.kill(int(pid), 0)
            continue                    # that process lives: its run's key is in use
        except ProcessLookupError:
            pass
        except PermissionError:
            continue                    # another user's live process
        shutil.rmtree(d, ignore_errors=True)
        removed.append(str(d))
    return removed


def make_certificate(common_name: str = "tcpdelay-recv", valid_s: float = 2 * 86_400) -> RunCertificate:
    """A new key and self-signed certificate, written to a new temporary directory."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(seconds=valid_s))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
            .sign(key, hashes.SHA256()))
    d = Path(tempfile.mkdtemp(prefix=f"{KEY_DIR_PREFIX}{os.getpid()}-"))
    cert_path, key_path = d / "cert.pem", d / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return RunCertificate(str(d), str(cert_path), str(key_path), fingerprint(cert))
