"""Who may talk to the dashboard: a token on every request, CSRF checks on every action.

The rules, in the order the middleware applies them:

1. The ``Host`` header must name the address the server was started on (a page on another site
   that rebinds its DNS name to 127.0.0.1 is refused before anything else).
2. Every request carries the token: ``?token=`` (a browser's first visit, which trades it for an
   HttpOnly, SameSite=Strict session cookie and is redirected to the same URL without it), the
   session cookie, or ``Authorization: Bearer <token>`` (scripts). EventSource requests carry the
   cookie like any other same-origin request.
3. Actions (any method other than GET/HEAD) also need the CSRF header, whose value only a page of
   this origin can read (from ``/api/session``), and a same-origin ``Origin``/``Sec-Fetch-Site``
   when the browser sends them. No CORS header is ever sent, so no other origin can read answers.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["COOKIE", "CSRF_HEADER", "Guard"]

COOKIE = "kubetrain_dashboard"
CSRF_HEADER = "X-Kubetrain-CSRF"
_SAFE_METHODS = frozenset({"GET", "HEAD"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kubetrain dashboard: {title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px/1.5 system-ui,sans-serif;background:#f5f7fa;color:#1b2330;margin:0}}
main{{max-width:36rem;margin:12vh auto;padding:2rem;background:#fff;border-radius:8px;
border:1px solid #d5dbe3}}h1{{font-size:1.3rem;margin-top:0}}code{{background:#eef1f5;
padding:.1rem .3rem;border-radius:3px}}</style></head>
<body><main role="alert"><h1>{title}</h1><p>{message}</p></main></body></html>
"""


@dataclass
class Guard:
    """The secrets of one dashboard run and the checks made with them."""

    hosts: frozenset[str]
    cookie: str = COOKIE
    """Per port: browsers share cookies between ports of one host, runs must not."""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def csrf(self) -> str:
        """Bound to this run's session: a page of another run (or site) cannot know it."""
        return hmac.new(self.session.encode(), b"csrf", hashlib.sha256).hexdigest()

    def _authenticated(self, request: web.Request) -> bool:
        cookie = request.cookies.get(self.cookie, "")
        if cookie and hmac.compare_digest(cookie, self.session):
            return True
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and hmac.compare_digest(auth[7:].strip(), self.token):
            return True
        query = request.query.get("token", "")
        return bool(query) and hmac.compare_digest(query, self.token)

    def _same_origin(self, request: web.Request) -> bool:
        site = request.headers.get("Sec-Fetch-Site")
        if site is not None and site != "same-origin":
            return False
        origin = request.headers.get("Origin")
        return origin is None or origin in {f"http://{h}" for h in self.hosts}

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.host not in self.hosts:
            return _refuse(
                request, 403, "Wrong address", "This server answers only on its own address."
            )
        if not self._authenticated(request):
            return _refuse(
                request,
                401,
                "Token required",
                "This page needs the token printed by <code>kubetrain dashboard</code>. The link "
                "you used has no token, a wrong one, or one from an earlier run (a token lasts as "
                "long as the server that printed it). Open the URL it printed again.",
            )
        if request.method not in _SAFE_METHODS:
            sent = request.headers.get(CSRF_HEADER, "")
            if not (sent and hmac.compare_digest(sent, self.csrf) and self._same_origin(request)):
                return _refuse(
                    request, 403, "Cross-site request refused", "Actions come only from this page."
                )
        if "token" in request.query and request.method in _SAFE_METHODS:
            # The first visit: trade the token in the URL for a cookie, then drop it from the URL
            # (and so from the history and any Referer).
            rest = {k: v for k, v in request.query.items() if k != "token"}
            response: web.StreamResponse = web.HTTPFound(request.rel_url.with_query(rest))
        else:
            response = await handler(request)
        if request.cookies.get(self.cookie) != self.session:
            response.set_cookie(
                self.cookie, self.session, httponly=True, samesite="Strict", path="/"
            )
        _harden(response)
        return response


def _harden(response: web.StreamResponse) -> None:
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "form-action 'self'",
    )
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("X-Frame-Options", "DENY")


def _refuse(request: web.Request, status: int, title: str, message: str) -> web.Response:
    """JSON for the page's own requests, a readable page for a person's browser."""
    if request.path.startswith("/api/"):
        plain = message.replace("<code>", "").replace("</code>", "")
        response = web.json_response({"error": f"{title}: {plain}"}, status=status)
    else:
        response = web.Response(
            text=_REFUSED_PAGE.format(title=title, message=message),
            status=status,
            content_type="text/html",
        )
    _harden(response)
    return response
