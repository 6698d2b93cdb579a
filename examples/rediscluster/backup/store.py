"""Backup destinations: a file on a mounted PersistentVolumeClaim, or an object in an S3-compatible
store (through boto3's managed transfers).

Guarantees, for both:

- ``put`` streams a file object into the destination in bounded memory and returns the byte count
  and SHA-256 of what was stored; nothing claims to be the backup until all of it is there:
  a PVC file is written as ``<path>.partial``, fsynced and renamed; an S3 object is a multipart
  upload (8 MiB parts, at most 4 held in memory and 4 in flight: ~64 MiB whatever the size), which the
  store shows only once ``CompleteMultipartUpload`` succeeds — boto3 aborts it when the source
  raises (a truncated snapshot never becomes an object);
- ``get`` streams the stored backup into a local file the same way (temporary name, checked
  against the expected size and SHA-256, then renamed): a corrupt or partial download never
  replaces the target;
- failures raise :class:`StoreError` with ``permanent`` set when retrying cannot help (missing
  bucket or claim directory, rejected credentials) — the Job then fails at once instead of
  spending its retries.

An S3 store talks to its endpoint and nothing else: every request is checked before it is sent
(botocore's ``before-send``) to go to the endpoint's scheme, host and port — a request anywhere
else is refused with a permanent :class:`StoreError`; the HTTP layer follows no redirect
(botocore's), and a redirect answer (301/302/307/308, ``PermanentRedirect``) is a permanent
:class:`StoreError` naming where it pointed, raised by a ``needs-retry`` handler that runs before
botocore's S3 region redirector (which would otherwise re-send the request, and against a store
redirecting every request recursed until Python's recursion limit). A store that redirects gets
neither the data nor a signed request elsewhere.

The S3 access key pair comes from the environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``: the Job sets them by ``secretKeyRef``) and is never logged.
"""

from __future__ import annotations

import copy
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, cast
from urllib.parse import urlsplit

import boto3
import botocore.exceptions
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["PART_SIZE", "PvcStore", "Readable", "S3Store", "Store", "StoreError", "Stored"]

PART_SIZE = 8 * 1024 * 1024
_COPY_CHUNK = 1024 * 1024
_REDIRECTS = {"301", "302", "307", "PermanentRedirect", "TemporaryRedirect"}
_PERMANENT_S3 = {
    "NoSuchBucket",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "InvalidBucketName",
    "403",
    "404",
    "NoSuchKey",
}


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the port made explicit."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


class StoreError(Exception):
    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


@dataclass(frozen=True)
class Stored:
    location: str
    size_bytes: int
    sha256: str


class Readable(Protocol):
    """What a backup is read from: a file, an HTTP body, an ``RdbStream``."""

    def read(self, n: int = -1, /) -> bytes: ...


class _Hashing:
    """A file object passing reads through, counting and hashing them."""

    def __init__(self, source: Readable) -> None:
        self.source = source
        self.size = 0
        self.hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data = self.source.read(n)
        self.size += len(data)
        self.hash.update(data)
        return data


class Store(Protocol):
    location: str

    def put(self, source: Readable) -> Stored: ...
    def get(self, target: Path, *, sha256: str, size_bytes: int | None) -> None: ...
    def delete(self) -> None: ...


def _verify(path: Path, got: _Hashing, sha256: str, size_bytes: int | None, location: str) -> None:
    if size_bytes is not None and got.size != size_bytes:
        path.unlink(missing_ok=True)
        raise StoreError(f"{location}: {got.size} bytes, the backup recorded {size_bytes}", permanent=True)
    if got.hash.hexdigest() != sha256:
        path.unlink(missing_ok=True)
        raise StoreError(
            f"{location}: SHA-256 {got.hash.hexdigest()} does not match the backup's {sha256} (corrupt)",
            permanent=True,
        )


def _copy(source: _Hashing, out: BinaryIO) -> None:
    while chunk := source.read(_COPY_CHUNK):
        out.write(chunk)


class PvcStore:
    """``path`` inside the claim mounted at ``mount``."""

    def __init__(self, mount: Path, path: str, claim: str) -> None:
        self.file = mount / path
        self.mount = mount
        self.location = f"pvc://{claim}/{path}"

    def _check_mount(self) -> None:
        if not self.mount.is_dir():
            raise StoreError(f"{self.location}: the claim is not mounted at {self.mount}", permanent=True)

    def put(self, source: Readable) -> Stored:
        self._check_mount()
        partial = self.file.with_name(self.file.name + ".partial")
        got = _Hashing(source)
        try:
            partial.parent.mkdir(parents=True, exist_ok=True)
            with partial.open("wb") as out:
                _copy(got, out)
                out.flush()
                os.fsync(out.fileno())
            partial.rename(self.file)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise StoreError(f"{self.location}: {exc}", permanent=False) from exc
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return Stored(self.location, got.size, got.hash.hexdigest())

    def get(self, target: Path, *, sha256: str, size_bytes: int | None) -> None:
        self._check_mount()
        partial = target.with_name(target.name + ".partial")
        try:
            source = self.file.open("rb")
        except FileNotFoundError as exc:
            raise StoreError(f"{self.location}: no such backup file", permanent=True) from exc
        with source, partial.open("wb") as out:
            got = _Hashing(source)
            _copy(got, out)
        _verify(partial, got, sha256, size_bytes, self.location)
        partial.rename(target)

    def delete(self) -> None:
        self._check_mount()
        self.file.unlink(missing_ok=True)


class S3Store:
    """``s3://bucket/key`` at ``endpoint``, credentials from the environment."""

    def __init__(self, endpoint: str, bucket: str, key: str, region: str, *, ca_bundle: str | None) -> None:
        self.bucket, self.key = bucket, key
        self.location = f"s3://{bucket}/{key}"
        self.endpoint = endpoint
        access = os.environ.get("AWS_ACCESS_KEY_ID")
        secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
        if not access or not secret:
            raise StoreError(
                "the S3 credentials are missing (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)", permanent=True
            )
        self.client: S3Client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=region,
            aws_access_key_id=access,
            aws_secret_access_key=secret,
            verify=ca_bundle if ca_bundle else True,
            config=Config(
                connect_timeout=5,
                read_timeout=60,
                retries={"max_attempts": 3, "mode": "standard"},
                s3={"addressing_style": "path"},
                # checksums only when the operation requires one: plain S3-compatible stores
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )
        self._origin = _origin(endpoint)
        self.client.meta.events.register("before-send.s3", self._only_to_the_endpoint)
        self.client.meta.events.register_first("needs-retry.s3", self._no_redirects)
        self.transfer = TransferConfig(
            multipart_threshold=PART_SIZE,
            multipart_chunksize=PART_SIZE,
            max_concurrency=4,
            use_threads=True,
            preferred_transfer_client="classic",
        )
        # s3transfer's bound on the parts read from a non-seekable source and not yet sent
        self.transfer.max_in_memory_upload_chunks = 4

    def _only_to_the_endpoint(self, request: Any, **_: Any) -> None:
        """botocore ``before-send`` handler: refuse a request to anywhere but the endpoint."""
        if _origin(request.url) != self._origin:
            where = urlsplit(request.url)
            raise StoreError(
                f"{self.location}: refusing to send a request to {where.scheme}://{where.netloc}: "
                f"backups talk to {self.endpoint} only (redirects are not followed)",
                permanent=True,
            )

    def _no_redirects(self, response: Any = None, **_: Any) -> None:
        """botocore ``needs-retry`` handler, ahead of the region redirector: a redirect is final."""
        if response is None:
            return
        http, parsed = response
        code = str((parsed or {}).get("Error", {}).get("Code", ""))
        status = getattr(http, "status_code", None)
        if status in (301, 302, 307, 308) or code in _REDIRECTS:
            headers = getattr(http, "headers", None) or {}
            region = headers.get("x-amz-bucket-region")
            to = headers.get("location") or (f"region {region}" if region else "elsewhere")
            raise StoreError(
                f"{self.location}: {self.endpoint} answered with a redirect ({status or code}) to {to}: "
                "redirects are not followed (set the endpoint and region of the store that holds the bucket)",
                permanent=True,
            )

    def at(self, key: str) -> S3Store:
        """The object ``key`` of the same bucket, sharing this store's client (one connection pool)."""
        other = copy.copy(self)
        other.key, other.location = key, f"s3://{self.bucket}/{key}"
        return other

    def _error(self, exc: Exception) -> StoreError:
        if isinstance(exc, botocore.exceptions.ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            message = str(exc.response.get("Error", {}).get("Message", "")) or code
            return StoreError(f"{self.location}: {code}: {message}", permanent=code in _PERMANENT_S3)
        if isinstance(
            exc, botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectTimeoutError
        ):
            return StoreError(f"{self.location}: cannot reach {self.endpoint}", permanent=False)
        if isinstance(
            exc, botocore.exceptions.NoCredentialsError | botocore.exceptions.PartialCredentialsError
        ):
            return StoreError(f"{self.location}: no usable credentials", permanent=True)
        return StoreError(f"{self.location}: {type(exc).__name__}: {exc}", permanent=False)

    def put(self, source: Readable) -> Stored:
        got = _Hashing(source)
        try:
            self.client.head_bucket(Bucket=self.bucket)  # a clear error before any data moves
        except botocore.exceptions.ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket"):
                raise StoreError(
                    f"bucket {self.bucket!r} does not exist at {self.endpoint}", permanent=True
                ) from exc
            if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                raise StoreError(
                    f"{self.endpoint} rejected the credentials for bucket {self.bucket!r} ({code})",
                    permanent=True,
                ) from exc
            raise self._error(exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise self._error(exc) from exc
        try:
            # boto3 reads it sequentially, part by part (a non-seekable upload)
            self.client.upload_fileobj(cast(BinaryIO, got), self.bucket, self.key, Config=self.transfer)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise self._error(exc) from exc
        return Stored(self.location, got.size, got.hash.hexdigest())

    def get(self, target: Path, *, sha256: str, size_bytes: int | None) -> None:
        partial = target.with_name(target.name + ".partial")
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key)["Body"]
            with partial.open("wb") as out:
                got = _Hashing(body)
                _copy(got, out)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            partial.unlink(missing_ok=True)
            raise self._error(exc) from exc
        _verify(partial, got, sha256, size_bytes, self.location)
        partial.rename(target)

    def delete(self) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise self._error(exc) from exc
