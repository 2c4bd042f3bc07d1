"""Who may talk to ``kubetrain dashboard``: the token on every request, CSRF on every action.

The checks stand before any call to the Kubernetes API, so these dashboards point at an API
server that is not there; a request that passes them reaches the API and fails with 502, which
is the control that the refusals below come from the checks and not from the missing server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_support import DEAD_KUBECONFIG, Dashboard, csrf, request, start_dashboard, stop


@pytest.fixture(scope="module")
def dashboards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Dashboard]]:
    home = tmp_path_factory.mktemp("dash")
    kubeconfig = home / "kubeconfig"
    kubeconfig.write_text(DEAD_KUBECONFIG)
    started: dict[str, Dashboard] = {}
    try:
        started["actions"] = start_dashboard(
            home, "--allow-actions", "--kubeconfig", str(kubeconfig)
        )
        started["read-only"] = start_dashboard(home, "--kubeconfig", str(kubeconfig))
        yield started
    finally:
        for dash in started.values():
            stop(dash)


REFUSED = [
    pytest.param("GET", "/api/session", {}, 401, id="no token at all"),
    pytest.param("GET", "/api/session?token=wrong", {}, 401, id="a wrong token in the URL"),
    pytest.param(
        "GET", "/api/session", {"Authorization": "Bearer wrong"}, 401, id="a wrong bearer token"
    ),
    pytest.param(
        "GET", "/api/session", {"Cookie": "kubetrain_dashboard=forged"}, 401, id="a forged cookie"
    ),
    pytest.param("GET", "/api/trainjobs/stream", {}, 401, id="the event stream without a token"),
    pytest.param("GET", "/api/experiments/default/x", {}, 401, id="an Experiment without a token"),
    pytest.param("GET", "/static/app.js", {}, 401, id="a static file without a token"),
    pytest.param(
        "GET",
        "/api/session",
        {"AUTH": "", "Host": "evil.example:80"},
        403,
        id="another Host (DNS rebinding)",
    ),
    pytest.param(
        "POST",
        "/api/trainjobs/default/sleeper/delete",
        {"AUTH": ""},
        403,
        id="an action without the CSRF header",
    ),
    pytest.param(
        "POST",
        "/api/trainjobs/default/sleeper/delete",
        {"AUTH": "", "CSRF": "", "Origin": "http://evil.example"},
        403,
        id="an action from another origin",
    ),
    pytest.param(
        "POST",
        "/api/trainjobs/default/sleeper/delete",
        {"AUTH": "", "CSRF": "", "Sec-Fetch-Site": "cross-site"},
        403,
        id="an action a browser marks cross-site",
    ),
    pytest.param(
        "POST",
        "/api/trainjobs/default/sleeper/delete",
        {"AUTH": "", "X-Kubetrain-CSRF": "guess"},
        403,
        id="an action with a guessed CSRF value",
    ),
]


@pytest.mark.parametrize(("method", "path", "headers", "status"), REFUSED)
def test_requests_are_refused(
    dashboards: dict[str, Dashboard], method: str, path: str, headers: dict[str, str], status: int
) -> None:
    dash = dashboards["actions"]
    sent = dict(headers)
    if sent.pop("AUTH", None) is not None:
        sent["Authorization"] = f"Bearer {dash.token}"
    if sent.pop("CSRF", None) is not None:
        sent["X-Kubetrain-CSRF"] = csrf(dash)
    code, answer_headers, body = request(dash, path, method=method, headers=sent)
    assert code == status, body
    assert "Access-Control-Allow-Origin" not in answer_headers


@pytest.mark.parametrize(
    ("which", "action", "status", "said"),
    [
        pytest.param("read-only", "delete", 403, "--allow-actions",
                     id="a read-only dashboard refuses actions even with token and csrf"),
        pytest.param("actions", "suspend", 502, "cannot reach the Kubernetes API",
                     id="an action that passes every check reaches the API"),
    ],
)  # fmt: skip
def test_an_action_with_token_and_csrf(
    dashboards: dict[str, Dashboard], which: str, action: str, status: int, said: str
) -> None:
    dash = dashboards[which]
    headers = {"Authorization": f"Bearer {dash.token}", "X-Kubetrain-CSRF": csrf(dash)}
    code, _, body = request(
        dash, f"/api/trainjobs/default/sleeper/{action}", method="POST", headers=headers
    )
    assert code == status and said in body


def test_the_first_visit_trades_the_token_for_an_httponly_cookie(
    dashboards: dict[str, Dashboard],
) -> None:
    import http.client
    from urllib.parse import urlsplit

    dash = dashboards["read-only"]
    where = urlsplit(dash.url)
    conn = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
    conn.request("GET", f"/?{where.query}")
    answer = conn.getresponse()
    cookie = answer.getheader("Set-Cookie") or ""
    assert answer.status == 302 and answer.getheader("Location") == "/"  # token gone from the URL
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    conn.close()
    code, _, _ = request(dash, "/api/session", headers={"Cookie": cookie.split(";", 1)[0]})
    assert code == 200


def test_the_page_itself_needs_the_token_too(
    tmp_path: Path, dashboards: dict[str, Dashboard]
) -> None:
    code, _, body = request(dashboards["read-only"], "/")
    assert code == 401 and "Token required" in body and "kubetrain dashboard" in body
