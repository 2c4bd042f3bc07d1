"""Presigned GET URLs for many objects of one bucket, what botocore's ``generate_presigned_url``
writes, signed by AWS's C signer (``awscrt``).

Why not botocore for each URL: it runs every URL through its request pipeline (endpoint rules,
events, a signer object, the signing key derived anew) for about 0.5 ms of CPU, which with
many small objects is a good part of the client's whole cost per object; awscrt signs the
same request in a few tens of µs. Nothing of the URL's shape is guessed: botocore presigns
the first key, and that URL gives the scheme, host, path prefix, region and expiry. The URL
awscrt then signs for the same key at the same second must equal botocore's (byte for byte
but for the order of the query's parameters, which SigV4 sorts before signing: botocore's
Python signer puts ``X-Amz-Expires`` before ``X-Amz-SignedHeaders``, awscrt after), or it is
not used at all (`Presigner.exact` is false and every URL comes from botocore).
"""

from __future__ import annotations

import calendar
import datetime
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

__all__ = ["Presigner"]


class Presigner:
    """URLs for ``key`` in the bucket of ``model_key``'s URL ``model_url`` (botocore's,
    presigned with the credentials ``access_key``/``secret_key``/``token``).
    ``fallback(key)`` is botocore's own presigning, used where awscrt's does not match it."""

    def __init__(
        self,
        model_key: str,
        model_url: str,
        *,
        access_key: str,
        secret_key: str,
        token: str | None,
        fallback: Callable[[str], str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._fallback, self._clock = fallback, clock
        self.exact = False
        url = urlsplit(model_url)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        path_key = _key_path(model_key)
        scope = query.get("X-Amz-Credential", "").split("/")
        expires = query.get("X-Amz-Expires", "")
        if not url.path.endswith(path_key) or len(scope) != 5 or not expires.isdigit():
            return
        try:
            from awscrt import auth, http
        except ImportError:  # an install without the initializers extra: botocore signs
            return
        self._http = http
        self._origin = f"{url.scheme}://{url.netloc}"
        self._headers = [("host", url.netloc)]
        self._prefix = url.path[: len(url.path) - len(path_key)]
        # The constant part of the signing: the date is set once per second (`_config`).
        self._base = auth.AwsSigningConfig(
            algorithm=auth.AwsSigningAlgorithm.V4,
            signature_type=auth.AwsSignatureType.HTTP_REQUEST_QUERY_PARAMS,
            credentials_provider=auth.AwsCredentialsProvider.new_static(
                access_key, secret_key, token
            ),
            region=scope[2],
            service=scope[3],
            # S3's rules: the path signed as it is sent, '.' and '//' kept.
            use_double_uri_encode=False,
            should_normalize_uri_path=False,
            signed_body_value=auth.AwsSignedBodyValue.UNSIGNED_PAYLOAD,
            expiration_in_seconds=int(expires),
        )
        self._sign = auth.aws_sign_request
        self._at: tuple[int, Any] | None = None
        amz_date = query.get("X-Amz-Date", "")
        try:
            second = float(calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")))
        except ValueError:
            return
        self.exact = _same(self._url(model_key, second), model_url)

    def url(self, key: str) -> str:
        if not self.exact:
            return self._fallback(key)
        return self._url(key, self._clock())

    def _config(self, now: float) -> Any:
        second = int(now)
        at = self._at
        if at is None or at[0] != second:
            date = datetime.datetime.fromtimestamp(second, datetime.UTC)
            at = self._at = (second, self._base.replace(date=date))
        return at[1]

    def _url(self, key: str, now: float) -> str:
        request = self._http.HttpRequest(
            "GET", self._prefix + _key_path(key), self._http.HttpHeaders(self._headers)
        )
        # Signing is synchronous for static credentials: the future is already done.
        self._sign(request, self._config(now)).result()
        return f"{self._origin}{request.path}"


def _same(a: str, b: str) -> bool:
    """The same URL, its query's parameters in any order (each compared as written)."""
    (a_url, _, a_query), (b_url, _, b_query) = a.partition("?"), b.partition("?")
    return a_url == b_url and sorted(a_query.split("&")) == sorted(b_query.split("&"))


def _key_path(key: str) -> str:
    # botocore's quoting of a key in the URL path ('/' and '~' stay).
    return quote(key, safe="/~")
