"""``s3://bucket/prefix``: every object under the prefix, fetched in parallel with boto3.

One listing, then every object is streamed straight into its file, up to ``concurrency``
requests in flight (whole objects on one event loop, large ones on a pool of threads). Sizes come from the listing, so no object costs an extra
HEAD; a response whose ETag differs from the listing's fails the run (the object changed while
it was being fetched). The output path of an object is its key below the prefix; an object
whose key is the prefix itself keeps its base name (upstream's rule).

A large object (two `MIN_PART` or more) starts as one stream too; whether it gets more is
measured, not assumed (`kubetrain.initializers.ramp`): while threads are free, the fetch
splits the largest rests in halves (the new halves are ranged GETs written at their offsets)
where a piece takes several times the measured wait for a first byte, and splits further only
while each new stream raises the aggregate rate by half a stream's worth; new streams that
lowered it are taken back, and the streams
they were cut from read on through their ranges (as a stream does through the next range when
that one has no byte yet). So against a server where parallel ranges pay (S3, where one stream
is capped) a large object ends up in ranges, and against one that reads the whole object
before it answers (moto) it stays one stream.

Why not s3transfer's download manager: it funnels every byte through one I/O thread in
256 KB pieces, and on a small machine that thread, not the network, sets the pace (about a
fifth of a plain streamed ``GetObject`` here).

Each GET is a presigned URL fetched without botocore's request pipeline (a ``GetObject`` call
costs about 3.8 ms of client CPU there), and with many small objects the client's CPU per
object, held under one GIL on a machine whose cores the server shares, is what bounds the
rate. So whole objects (below two `MIN_PART`) are fetched on one event loop in a thread of
its own: aiohttp (on uvloop where installed) keeps ``concurrency`` connections alive, each
object is written as its body arrives, and nothing crosses threads per object: the fetch's
thread collects completed files every `COMMIT_S` and commits them in one batch (one manifest
write). The URLs are signed by AWS's C signer, awscrt (`kubetrain.initializers.presign`:
each URL checked to be botocore's own). Large objects' streams are urllib3 GETs on the pool's
threads, where the ramp can cut them. Anything but a plain success (an S3 error, a redirect to
another region, a connection or TLS failure, a proxy in the environment) goes through
``GetObject`` itself, from where the stream got to, so errors, retries and redirects stay
botocore's. (moto with its IAM auth on cannot check a presigned URL and answers 500: against
it every GET takes that path.)
"""

from __future__ import annotations

import asyncio
import functools
import logging
import posixpath
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from kubetrain.api.access import dicts, obj_at
from kubetrain.kube.eventloop import run as run_loop

from .config import Config, InitializerError
from .meter import Meter, human
from .presign import Presigner
from .ramp import WINDOW_S, Ramp, min_piece, split_points
from .select import selected
from .store import Store

__all__ = ["CONCURRENCY", "S3Object", "fetch_s3", "s3_client"]

log = logging.getLogger("kubetrain.initializers")

MB = 1024 * 1024
# Requests in flight: small objects are latency-bound, so more in flight pays (against moto,
# 32 reached the server's own ceiling where 16 stayed a quarter below it).
CONCURRENCY = 32


@dataclass(frozen=True)
class S3Object:
    key: str
    rel: str
    size: int
    etag: str


def s3_client(cfg: Config, *, concurrency: int) -> Any:
    return _connect(cfg, concurrency=concurrency)[0]


def _session(**settings: Any) -> Any:
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    # Timestamps stay text: botocore parses each with dateutil (about 0.25 ms apiece, most of
    # a listing's CPU), and nothing here reads one (the listing's LastModified least of all).
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    return boto3.session.Session(botocore_session=core, **settings)


def _connect(cfg: Config, *, concurrency: int) -> tuple[Any, Any]:
    """The S3 client, and the credentials it signs with (None where there are none)."""
    from botocore.config import Config as BotoConfig

    region = cfg.region if cfg.region and cfg.region != "auto" else None
    session = _session(
        aws_access_key_id=cfg.access_key_id,
        aws_secret_access_key=cfg.secret_access_key,
        region_name=region,
    )
    if cfg.role_arn:
        # ROLE_ARN: the given (or ambient) credentials assume the role; its temporary
        # credentials do the fetching. STS lives at the same endpoint on S3-compatible servers.
        sts = session.client("sts", endpoint_url=cfg.endpoint, region_name=region or "us-east-1")
        creds = sts.assume_role(RoleArn=cfg.role_arn, RoleSessionName="kubetrain-initializer")[
            "Credentials"
        ]
        session = _session(
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
            region_name=region,
        )
    client = session.client(
        "s3",
        endpoint_url=cfg.endpoint,
        config=BotoConfig(
            # Path-style: an endpoint given as an address has no per-bucket host names.
            s3={"addressing_style": "path" if cfg.endpoint else "auto"},
            # SigV4 for presigned URLs too (botocore presigns S3 with SigV2 by default).
            signature_version="s3v4",
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=60,
            max_pool_connections=concurrency + 4,
        ),
    )
    return client, session.get_credentials()


def _cause(err: Exception, cfg: Config) -> str:
    """One line saying what went wrong, in the user's terms."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        ParamValidationError,
    )

    if isinstance(err, EndpointConnectionError):
        return f"cannot connect to the S3 endpoint {cfg.endpoint or '(AWS default)'}"
    if isinstance(err, NoCredentialsError):
        return "no S3 credentials (set ACCESS_KEY_ID and SECRET_ACCESS_KEY)"
    if isinstance(err, ParamValidationError):
        return f"invalid request: {err}"
    if isinstance(err, ClientError):
        error = obj_at(err.response, "Error")
        code = str(error.get("Code", ""))
        status = obj_at(err.response, "ResponseMetadata").get("HTTPStatusCode")
        if code == "NoSuchBucket":
            return f"bucket {cfg.location!r} does not exist"
        if code == "InvalidAccessKeyId":
            return "the S3 server does not know this access key (ACCESS_KEY_ID)"
        if code == "SignatureDoesNotMatch":
            return "the secret access key does not match the access key (SECRET_ACCESS_KEY)"
        if code in ("AccessDenied", "403") or status == 403:
            return f"access denied to bucket {cfg.location!r} with these credentials"
        if code in ("NoSuchKey", "404") or status == 404:
            return "the object vanished while it was being fetched"
        return f"S3 error {code or status}: {error.get('Message', '')}".strip()
    return f"{type(err).__name__}: {err}"


def list_objects(client: Any, cfg: Config) -> list[S3Object]:
    objects: list[S3Object] = []
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=cfg.location, Prefix=cfg.prefix)
    for page in pages:
        for item in dicts(page.get("Contents")):
            key = str(item["Key"])
            if key.endswith("/"):
                continue  # a folder marker
            rel = key[len(cfg.prefix) :].lstrip("/") or posixpath.basename(key)
            objects.append(S3Object(key, rel, int(item["Size"]), str(item.get("ETag", ""))))
    return objects


def _identity(cfg: Config, obj: S3Object) -> str:
    return f"s3|{cfg.endpoint or 'aws'}|{cfg.location}|{obj.key}|{obj.etag}|{obj.size}"


def _http(endpoint: str | None, concurrency: int) -> Any:
    """The connection pool of the presigned GETs; None where a proxy applies (botocore
    knows proxies, the plain pool does not)."""
    import urllib3
    from botocore.httpsession import where

    host = urlsplit(endpoint).hostname if endpoint else None
    if not host or (urllib.request.getproxies() and not urllib.request.proxy_bypass(host)):
        return None
    return urllib3.PoolManager(
        maxsize=concurrency,
        ca_certs=where(),
        timeout=urllib3.Timeout(connect=5, read=60),
        retries=urllib3.Retry(total=3, redirect=0, status=0, raise_on_status=False),
    )


def _botocore_url(client: Any, bucket: str, key: str) -> str:
    return str(
        client.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=3600
        )
    )


def _presigner(client: Any, credentials: Any, bucket: str, key: str) -> Presigner | None:
    """Presigned URLs of ``bucket``'s objects, botocore's own for ``key`` as the model."""
    from botocore.credentials import RefreshableCredentials

    if credentials is None or isinstance(credentials, RefreshableCredentials):
        return None  # credentials that change while the fetch runs: botocore signs each URL
    frozen = credentials.get_frozen_credentials()
    return Presigner(
        key,
        _botocore_url(client, bucket, key),
        access_key=frozen.access_key,
        secret_key=frozen.secret_key,
        token=frozen.token,
        fallback=lambda k: _botocore_url(client, bucket, k),
    )


def _ssl(endpoint: str) -> Any:
    """The event loop's TLS settings: botocore's CA bundle, as its own requests use."""
    if urlsplit(endpoint).scheme != "https":
        return False
    import ssl

    from botocore.httpsession import where

    return ssl.create_default_context(cafile=where())


# How often the fetch hands completed files to the store (renamed, in the manifest).
COMMIT_S = 0.25
# A ranged stream fetches at least this much: below it the request's own cost (its time to
# first byte, the signing) is no longer small beside its transfer.
MIN_PART = 16 * MB
# A read in progress never crosses a cut made meanwhile: a cut lies at least MIN_PART past
# the stream's position, and MIN_PART >= _BUFFER.
_BUFFER = MB


def _reader(body: Any) -> Callable[[int], Any]:
    """``read(n)``: up to ``n`` bytes of a response's body, valid until the next call. A
    presigned GET's urllib3 response is read straight from the http.client response under it
    into one buffer, reused: urllib3's own ``read`` allocates each chunk and copies it again
    through its buffer, about 0.14 s of CPU per GB here (a tenth of the client's CPU for a
    large object, on cores the server shares). The bytes are the object's as stored, as
    ``GetObject`` gives them: urllib3 would decode an object stored with a
    ``Content-Encoding`` (gzip), and then neither its size nor its ranges would add up. A read
    that fails raises urllib3's ``ProtocolError``, as urllib3's ``read`` does, so the stream
    goes on through ``GetObject`` from where it got to."""
    import http.client

    import urllib3

    if not isinstance(body, urllib3.HTTPResponse):
        return cast(Callable[[int], Any], body.read)  # botocore's body: GetObject's bytes
    raw = getattr(body, "_fp", None)  # urllib3 2.x keeps the http.client response here
    if not isinstance(raw, http.client.HTTPResponse):
        return functools.partial(body.read, decode_content=False)  # the bytes as stored
    buffer = memoryview(bytearray(_BUFFER))

    def read(n: int) -> memoryview:
        try:
            got = raw.readinto(buffer[:n])
        except (OSError, http.client.HTTPException) as err:
            raise urllib3.exceptions.ProtocolError(f"reading the body: {err!r}", err) from err
        return buffer[:got]

    return read


@dataclass(eq=False)
class _Job:
    """One object being fetched, by one stream or, once split, by several."""

    obj: S3Object
    path: Path
    splittable: bool
    streams: int = 0  # not yet finished
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(eq=False)
class _Stream:
    """One GET, writing ``[pos, end)`` of its object at its offset. A split lowers ``end``
    (the rest goes to a new stream); taking the split back raises it again, which works until
    the stream has stopped: its request asks for everything up to ``request_end``."""

    job: _Job
    start: int
    end: int
    request_end: int
    parent: _Stream | None = None
    pos: int = -1
    asked: float = 0.0  # when its GET was sent (time.monotonic)
    waited: float | None = None  # seconds from its GET to its first byte, once that came
    stopped: bool = False
    taken_back: bool = False
    presign: bool = True  # False once a presigned GET failed: GetObject takes over

    def __post_init__(self) -> None:
        self.pos = self.start

    @property
    def ranged(self) -> bool:
        return self.pos > 0 or self.request_end < self.job.obj.size


class _Fetch:
    """The streams of one run on a pool of ``concurrency`` threads, and the ramp that splits
    large objects' streams while splitting raises the aggregate rate."""

    def __init__(
        self,
        client: Any,
        http: Any,
        bucket: str,
        meter: Meter,
        pool: Any,
        concurrency: int,
        signer: Presigner | None = None,
        window_s: float = WINDOW_S,
    ) -> None:
        self.client, self.http, self.bucket, self.meter = client, http, bucket, meter
        self.pool, self.concurrency, self.signer = pool, concurrency, signer
        self.lock = threading.Lock()
        self.streams: set[_Stream] = set()  # unfinished
        self.abort = threading.Event()
        self.ramp = Ramp(window_s=window_s)
        self.trial: list[_Stream] = []
        # The longest wait for a first byte among the streams started last (the first
        # stream's, then the last trial's): what a new range is expected to cost.
        self.first_byte_s: float | None = None
        self.waits: list[float] = []
        # Jobs complete and not yet handed to the store; ``settled`` is set once every job
        # has ended or one has failed (the first failure is ``failed``). The fetch's thread
        # collects ``completed`` a batch at a time: a wake-up per object, handed between
        # threads, cost more client CPU than the object's GET on a loaded machine.
        self.unfinished = 0
        self.completed: list[_Job] = []
        self.failed: _Job | None = None
        self.settled = threading.Event()
        self.taken_over = 0  # small objects whose presigned GET failed

    def _add(self, stream: _Stream) -> None:
        # Under the lock, in the same hold as a split: the object is never seen complete
        # between its parent's end being lowered and its child being counted.
        self.streams.add(stream)
        if not stream.job.streams and not stream.job.done.is_set():
            self.unfinished += 1
        stream.job.streams += 1

    # --- one stream -------------------------------------------------------------------

    def _run(self, stream: _Stream) -> None:
        try:
            if not self.abort.is_set() and not stream.taken_back:
                self._get(stream)
        except BaseException as err:
            self._failed(stream, err)
        finally:
            self._finish(stream)

    def _failed(self, stream: _Stream, err: BaseException) -> None:
        job = stream.job
        with self.lock:
            job.error = job.error or err
            self.failed = self.failed or job
        job.done.set()
        self.settled.set()

    def _finish(self, stream: _Stream) -> None:
        job = stream.job
        if stream.taken_back:
            self.meter.add(stream.start - stream.pos)  # its parent fetches those again
        with self.lock:
            stream.stopped = True
            self.streams.discard(stream)
            job.streams -= 1
            if not job.streams:
                job.done.set()
                self.completed.append(job)
                self.unfinished -= 1
                if not self.unfinished:
                    self.settled.set()

    def _get(self, stream: _Stream) -> None:
        presigned = self.http is not None and stream.presign
        if (presigned and self._presigned(stream)) or self.abort.is_set():
            return
        # GetObject takes over from where the stream got to.
        obj = stream.job.obj
        extra = {"Range": f"bytes={stream.pos}-{stream.request_end - 1}"} if stream.ranged else {}
        stream.asked = time.monotonic()
        response = self.client.get_object(Bucket=self.bucket, Key=obj.key, **extra)
        self._check(stream, response.get("ETag"))
        if extra and "ContentRange" not in response:
            raise InitializerError(
                f"s3://{self.bucket}/{obj.key}", "the S3 server ignored a byte range request"
            )
        body = response["Body"]
        try:
            self._copy(body, stream)
        finally:
            body.close()
        if stream.pos < stream.end:
            raise InitializerError(
                f"s3://{self.bucket}/{obj.key}", "the object's body ended before its size"
            )

    def _presigned(self, stream: _Stream) -> bool:
        """The stream through a presigned GET: True when done, False when ``GetObject``
        must take over (from ``stream.pos``)."""
        import urllib3

        url = self._url(stream.job.obj.key)
        ranged = stream.ranged
        headers = {"Range": f"bytes={stream.pos}-{stream.request_end - 1}"} if ranged else {}
        stream.asked = time.monotonic()
        try:
            response = self.http.request("GET", url, headers=headers, preload_content=False)
        except urllib3.exceptions.HTTPError:
            return False
        try:
            if response.status != (206 if ranged else 200):
                return False
            self._check(stream, response.headers.get("ETag"))
            try:
                self._copy(response, stream)
            except urllib3.exceptions.HTTPError:
                return False
            return stream.pos >= stream.end
        finally:
            if stream.pos < stream.request_end:
                response.close()  # stopped short (split, or failed): the rest is not read
            response.release_conn()

    def _url(self, key: str) -> str:
        if self.signer is not None:
            return self.signer.url(key)
        return _botocore_url(self.client, self.bucket, key)

    def _check(self, stream: _Stream, etag: str | None) -> None:
        obj = stream.job.obj
        if obj.etag and etag not in (None, obj.etag):
            raise InitializerError(
                f"s3://{self.bucket}/{obj.key}", "the object changed while it was being fetched"
            )

    def _copy(self, body: Any, stream: _Stream) -> None:
        # A large object's file exists at its full size (streams write into it at their
        # offsets); any other is created here, unless a failed GET already began it.
        mode = "r+b" if stream.job.splittable or stream.pos > 0 else "wb"
        read = _reader(body)
        with stream.job.path.open(mode) as f:
            f.seek(stream.pos)
            while not self.abort.is_set():
                with self.lock:
                    want = min(_BUFFER, stream.end - stream.pos)
                    if want <= 0 and self._read_on(stream):
                        want = min(_BUFFER, stream.end - stream.pos)
                    if want <= 0:
                        stream.stopped = True  # from here on its end cannot be raised
                        break
                chunk = read(want)
                if not chunk:
                    break
                f.write(chunk)
                with self.lock:
                    if stream.waited is None:
                        stream.waited = time.monotonic() - stream.asked
                        self.waits.append(stream.waited)
                    stream.pos += len(chunk)
                self.meter.add(len(chunk))

    def _read_on(self, stream: _Stream) -> bool:
        """At its end, ``stream`` takes over the range after it where the stream cut there
        has no byte yet and ``stream``'s request covers that range: its response is flowing,
        the other's has not begun (on a server that reads a whole object before answering a
        range, that can take longer than the range itself). Under the lock."""
        for other in self.streams:
            if (
                other.job is stream.job
                and other.start == stream.end
                and other.waited is None
                and not other.stopped
                and not other.taken_back
                and other.end <= stream.request_end
            ):
                self._take(stream, other)
                return True
        return False

    def _take(self, stream: _Stream, child: _Stream) -> None:
        """``stream`` reads on through ``child``'s range; ``child`` stops. Under the lock."""
        stream.end = child.end
        child.end = child.start
        child.taken_back = True

    # --- small objects: presigned GETs on one event loop ---------------------------------

    @contextmanager
    def small_gets(self, streams: list[_Stream], endpoint: str) -> Iterator[None]:
        """Fetch ``streams`` (whole objects, already counted) in a thread of their own: one
        event loop, one aiohttp session keeping ``concurrency`` connections alive. With the
        signing and the batched commits, a fetch of many small objects costs half the client
        CPU it did as urllib3 GETs on pool threads (no thread switch, no lock handed over,
        aiohttp's compiled HTTP parser). What does not come as a
        plain 200 goes to the thread pool, where ``GetObject`` takes over from where it got."""
        thread = threading.Thread(
            target=self._small_loop, args=(iter(streams), endpoint), name="s3-small", daemon=True
        )
        if streams:
            thread.start()
        try:
            yield
        finally:
            if streams:
                thread.join()

    def _small_loop(self, todo: Iterator[_Stream], endpoint: str) -> None:
        try:
            run_loop(self._small_gets(todo, _ssl(endpoint)))
        except BaseException as err:  # the loop itself failed: the thread pool does the rest
            log.debug("presigned GETs on the event loop stopped: %r", err)
        for stream in todo:
            self._finish(stream) if self.abort.is_set() else self._to_pool(stream)

    def _to_pool(self, stream: _Stream) -> None:
        stream.presign = False
        self.taken_over += 1
        self.pool.submit(self._run, stream)

    async def _small_gets(self, todo: Iterator[_Stream], ssl: Any) -> None:
        import aiohttp

        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.concurrency, ssl=ssl),
            timeout=aiohttp.ClientTimeout(sock_connect=5, sock_read=60),
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
        )
        async with session:
            await asyncio.gather(
                *(self._small_getter(session, todo) for _ in range(self.concurrency))
            )

    async def _small_getter(self, session: Any, todo: Iterator[_Stream]) -> None:
        import aiohttp

        for stream in todo:  # the getters share the iterator: each takes the next object
            if self.abort.is_set():
                self._finish(stream)
                continue
            try:
                done = await self._small_get(session, stream)
            except (TimeoutError, aiohttp.ClientError):
                done = False
            except BaseException as err:
                self._failed(stream, err)
                done = True
            if done:
                self._finish(stream)
            else:
                self._to_pool(stream)

    async def _small_get(self, session: Any, stream: _Stream) -> bool:
        """True when done, False when ``GetObject`` must take over (from ``stream.pos``)."""
        from yarl import URL

        url = URL(self._url(stream.job.obj.key), encoded=True)
        async with session.get(url) as response:
            if response.status != 200:
                return False
            self._check(stream, response.headers.get("ETag"))
            with stream.job.path.open("wb") as f:
                async for chunk in response.content.iter_chunked(_BUFFER):
                    f.write(chunk)
                    stream.pos += len(chunk)
                    self.meter.add(len(chunk))
                    if self.abort.is_set():
                        break
        return stream.pos >= stream.end

    # --- the ramp ---------------------------------------------------------------------

    def _splittable(self) -> list[_Stream]:
        return [s for s in self.streams if s.job.splittable and s.end > s.pos]

    def waiting(self) -> int:
        """The trial's streams still without a first byte."""
        with self.lock:
            return sum(1 for s in self.trial if s.waited is None and not s.taken_back)

    def tick(self, rate: float, waiting: int = 0) -> None:
        """One window's decision (the ramp's thread calls it)."""
        with self.lock:
            if self.waits:
                self.first_byte_s, self.waits = max(self.waits), []
            candidates = self._splittable()
            free = self.concurrency - len(self.streams)
            possible, min_part = 0, MIN_PART
            if free > 0 and self.first_byte_s is not None:
                min_part = min_piece(rate, len(self.streams), self.first_byte_s, MIN_PART)
                spans = [(i, s.pos, s.end) for i, s in enumerate(candidates)]
                possible = len(split_points(spans, free, min_part))
        if self.abort.is_set():
            return
        settled = self.ramp.settled
        step = self.ramp.step(rate, len(candidates), possible, waiting)
        if step > 0:
            self.trial = self.split(step, min_part)
            log.debug(
                "trying %d more ranged streams (%s/s so far, first bytes after %.0f ms)",
                len(self.trial), human(rate), 1000 * (self.first_byte_s or 0.0),
            )  # fmt: skip
        elif step < 0:
            self.take_back(self.trial)
            log.debug(
                "ranged streams slowed the fetch (%s/s, %d without a first byte): taken back",
                human(rate), waiting,
            )  # fmt: skip
            self.trial = []
        elif not self.ramp.trial:
            if self.ramp.settled and not settled:
                log.debug(
                    "%d streams at %s/s: no clear gain, none more tried",
                    len(self.streams), human(rate),
                )  # fmt: skip
            self.trial = []  # (while the ramp measures the trial again, its streams stay it)

    def split(self, n: int, min_part: int | None = None) -> list[_Stream]:
        """Up to ``n`` new ranged streams, each the second half of a stream's rest, halves
        of ``min_part`` (`MIN_PART` by default) or more."""
        with self.lock:
            candidates = self._splittable()
            spans = [(i, s.pos, s.end) for i, s in enumerate(candidates)]
            new: list[_Stream] = []
            for i, at in split_points(spans, n, MIN_PART if min_part is None else min_part):
                obj = candidates[i].job
                parent = next(s for s in [*candidates, *new] if s.job is obj and s.pos < at < s.end)
                child = _Stream(obj, at, parent.end, parent.end, parent=parent)
                parent.end = at
                self._add(child)
                new.append(child)
        for child in new:
            self.pool.submit(self._run, child)
        return new

    def take_back(self, streams: list[_Stream]) -> None:
        """Undo splits, newest first: the parent reads on through the child's range where it
        still can; where it cannot (it already stopped), the child stays."""
        with self.lock:
            for child in reversed(streams):
                parent = child.parent
                if parent is None or parent.stopped or parent.end != child.start:
                    continue
                self._take(parent, child)


@contextmanager
def _ramping(fetch: _Fetch, meter: Meter) -> Iterator[None]:
    """A thread that measures the aggregate rate over the ramp's windows, the first from the
    first bytes on, and lets the ramp act after each."""
    stop = threading.Event()
    ramp = fetch.ramp

    def loop() -> None:
        while not stop.wait(ramp.window_s / 5):
            waiting = fetch.waiting()
            rate = ramp.measure(time.monotonic(), meter.done, waiting)
            if rate is not None:
                fetch.tick(rate, waiting)

    thread = threading.Thread(target=loop, name="s3-ramp", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def fetch_s3(
    cfg: Config, store: Store, *, concurrency: int = CONCURRENCY, window_s: float = WINDOW_S
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    try:
        client, credentials = _connect(cfg, concurrency=concurrency)
        http = _http(client.meta.endpoint_url, concurrency)
        listed = list_objects(client, cfg)
    except Exception as err:
        raise InitializerError(cfg.storage_uri, _cause(err, cfg)) from err
    if not listed:
        where = f"under prefix {cfg.prefix!r}" if cfg.prefix else "at all"
        raise InitializerError(
            cfg.storage_uri, f"no object in bucket {cfg.location!r} {where} (wrong key?)"
        )
    # One pass, and a set of keys: list membership over thousands of objects is quadratic.
    objects: list[S3Object] = []
    for o in listed:
        if selected(o.rel, ignore=cfg.ignore_patterns):
            objects.append(o)
        else:
            log.info("skipping ignored file: %s", o.key)
    todo = [o for o in objects if not store.have(o.rel, _identity(cfg, o))]
    cached = len(objects) - len(todo)
    if store.cache is not None and cached:
        fetching = {o.key for o in todo}
        size = sum(o.size for o in objects if o.key not in fetching)
        log.info(
            "cache hit: %d of %d objects (%s) already fetched", cached, len(objects), human(size)
        )
    if not todo:
        log.info("nothing to fetch: all %d objects are in place", len(objects))
        return
    total = sum(o.size for o in todo)
    log.info("fetching %d objects (%s) from %s", len(todo), human(total), cfg.storage_uri)
    try:
        signer = _presigner(client, credentials, cfg.location, todo[0].key) if http else None
    except Exception as err:
        raise InitializerError(cfg.storage_uri, _cause(err, cfg)) from err
    jobs: list[_Job] = []
    for o in todo:
        job = _Job(o, store.target(o.rel, _identity(cfg, o)), o.size >= 2 * MIN_PART)
        if job.splittable:
            with job.path.open("wb") as f:
                f.truncate(o.size)
        jobs.append(job)
    with Meter(total) as meter, ThreadPoolExecutor(concurrency, "s3-get") as pool:
        fetch = _Fetch(client, http, cfg.location, meter, pool, concurrency, signer, window_s)
        # Whole objects go to the event loop (where GETs go straight to the endpoint), large
        # ones to the pool's threads, where the ramp can cut them.
        streams = [_Stream(job, 0, job.obj.size, job.obj.size) for job in jobs]
        with fetch.lock:  # all counted before any starts: the fetch is settled only at the end
            for stream in streams:
                fetch._add(stream)
        small: list[_Stream] = []
        for stream in streams:
            if http is None or stream.job.splittable:
                pool.submit(fetch._run, stream)
            else:
                small.append(stream)
        with (
            _ramping(fetch, meter) if any(j.splittable for j in jobs) else nullcontext(),
            fetch.small_gets(small, client.meta.endpoint_url),
        ):
            while True:
                settled = fetch.settled.wait(COMMIT_S)
                with fetch.lock:
                    batch, fetch.completed = fetch.completed, []
                    failed = fetch.failed
                if failed is not None:
                    fetch.abort.set()
                    break
                # What completed meanwhile, in one batch: one write of the manifest.
                store.commit([(j.obj.rel, _identity(cfg, j.obj), j.path) for j in batch])
                if settled:
                    break
        if fetch.taken_over and failed is None:
            log.info(
                "%d of %d objects came by GetObject: their presigned GETs failed",
                fetch.taken_over, len(small),
            )  # fmt: skip
        if failed is not None:
            # The ramp and the event loop have stopped (they submit no more): end the rest,
            # drop every part.
            pool.shutdown(wait=True, cancel_futures=True)
            for other in jobs:
                other.path.unlink(missing_ok=True)
            failure = failed.error
            assert failure is not None
            if isinstance(failure, InitializerError) or not isinstance(failure, Exception):
                raise failure
            raise InitializerError(
                f"s3://{cfg.location}/{failed.obj.key}", _cause(failure, cfg)
            ) from failure
