"""Ed25519 signatures on certificates and stored runs, with a key no worker sees.

Where the key lives: ``$KCONTRACT_KEY`` (a file path) if set, else
``~/.kcontract/keys/signing.key``.  It is created on first use (mode 0600, in a
folder of mode 0700).  A sandboxed worker never sees it: bubblewrap mounts an empty
tmpfs over the key's folder (:func:`kcontract.check.jail.hidden_folders`), and the
rest of the filesystem is read-only to it, so a kernel can neither read the key nor
plant one.  Without a sandbox (``sandbox: none``) the key is only as safe as the
user's files, which is why such runs are recorded as unsandboxed.

Which keys are trusted: this machine's own key, and the public keys listed (one
hex key a line, ``#`` comments) in ``trusted_keys`` beside the key file, or given to
``verify-certificate --trust-key``.  A signature is over the canonical bytes of the
record (sorted-key JSON), so any change to a byte of what was signed is detected.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Optional

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ENV_VAR = "KCONTRACT_KEY"
ALGORITHM = "ed25519"


def key_path() -> str:
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(os.path.expanduser("~"), ".kcontract", "keys", "signing.key")


def key_folder() -> str:
    """The folder of the key (created, mode 0700, so a sandbox can hide it before the
    key itself exists)."""
    folder = os.path.dirname(key_path())
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        pass
    return folder


@dataclass(frozen=True)
class Signer:
    private: Ed25519PrivateKey

    @property
    def public_hex(self) -> str:
        return public_hex(self.private.public_key())

    def sign(self, data: bytes) -> dict:
        return {"algorithm": ALGORITHM, "public_key": self.public_hex,
                "value": self.private.sign(data).hex()}


def public_hex(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


_CACHE: dict = {}


def signer() -> Signer:
    """This machine's signing key, created on first use."""
    path = key_path()
    if path in _CACHE:
        return _CACHE[path]
    key_folder()
    if os.path.exists(path):
        with open(path, "rb") as fh:
            raw = fh.read()
        try:
            key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(raw.decode().strip()))
        except ValueError as exc:
            from ..errors import UsageError
            raise UsageError(f"the signing key {path} is not an Ed25519 key ({exc})") from None
    else:
        key = Ed25519PrivateKey.generate()
        raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                serialization.NoEncryption()).hex().encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw + b"\n")
    _CACHE[path] = Signer(key)
    return _CACHE[path]


def trusted_keys(extra: Iterable[str] = ()) -> set:
    keys = {signer().public_hex}
    listed = os.path.join(os.path.dirname(key_path()), "trusted_keys")
    if os.path.exists(listed):
        with open(listed) as fh:
            for line in fh:
                line = line.split("#", 1)[0].strip()
                if line:
                    keys.add(line.lower())
    keys.update(k.strip().lower() for k in extra if k and k.strip())
    return keys


def verify(data: bytes, signature: Optional[dict], trusted: Optional[set] = None) -> tuple:
    """(ok, message): ``ok`` True when ``signature`` is a valid Ed25519 signature of
    ``data`` by a trusted key; False when absent, invalid or by an untrusted key."""
    if not isinstance(signature, dict) or signature.get("algorithm") != ALGORITHM:
        return False, "not signed (no Ed25519 signature)"
    pub = str(signature.get("public_key", ""))
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(pub))
        key.verify(bytes.fromhex(str(signature.get("value", ""))), data)
    except (ValueError, InvalidSignature):
        return False, "the signature does not match the content (modified after signing)"
    trusted = trusted_keys() if trusted is None else trusted
    if pub.lower() not in trusted:
        return False, (f"signed by key {pub[:16]}…, which is not trusted here (add it to "
                       f"{os.path.join(os.path.dirname(key_path()), 'trusted_keys')} or pass "
                       "--trust-key)")
    return True, f"Ed25519 signature by trusted key {pub[:16]}…"


__all__ = ["signer", "verify", "trusted_keys", "key_path", "key_folder", "Signer", "ENV_VAR"]
