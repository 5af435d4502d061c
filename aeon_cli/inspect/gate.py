"""The inspector's door (issue 27): no page, file or control without the session's secret.

Every inspector server — ``aeon inspect``, and step-through's — has a secret of its own
(:func:`aeon_cli.inspect.local.new_token`), and the URL the command prints (and opens) carries it:
``http://127.0.0.1:PORT/?token=SECRET``. As Jupyter does, that URL signs the browser in: the answer sets a cookie
holding the secret — ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (the browser sends it on no request
another site starts), ``Path=/`` — and sends the browser on to the same page without the token (a ``303``; or,
where the browser came from another page, such as the file :class:`~aeon_cli.inspect.local.Browser` opens, a page
that goes on by itself, so that the browser then counts the next request as the inspector's own and sends the
cookie). Every other request must carry that cookie: without it, with another value, or with a wrong ``?token=``,
it is ``403`` — pages, JSON, static files and step-through's controls alike. Secrets are compared in constant
time.

The cookie is named after the port (``aeon-inspect-PORT``): a browser keeps a host's cookies whatever the port,
so two inspectors open at once each keep their own.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Final
from urllib.parse import parse_qsl, quote, urlencode

from aeon_cli.inspect.app import HTML, SECURITY_HEADERS, Response
from aeon_cli.inspect.local import new_token, same

#: the query parameter of the URL that signs a browser in
TOKEN: Final = "token"  # noqa: S105 - a parameter's name
#: what a request's ``Sec-Fetch-Site`` says when the browser itself started it (an address typed, a command
#: line, a bookmark), or this server's own page did; absent: not a browser (curl, a script)
_OWN: Final = frozenset({None, "none", "same-origin"})
_REFUSED: Final = (
    "403 Forbidden: this inspector serves only the browser of the user who started it.\n"
    "Open the URL the command printed (it ends in ?token=...): it signs this browser in.\n"
)


def _plain(status: int, text: str) -> Response:
    return Response(status, "text/plain; charset=utf-8", text.encode(), SECURITY_HEADERS)


class Gate:
    """One server's secret, and the judgement of each request by it."""

    def __init__(self, port: int, token: str | None = None) -> None:
        #: the session's secret: in the printed URL, then in the browser's cookie
        self.token = token or new_token()
        #: the cookie's name: this server's own (a browser shares a host's cookies across its ports)
        self.cookie = f"aeon-inspect-{port}"

    @property
    def cookie_header(self) -> str:
        """The ``Cookie`` header value a signed-in browser sends (for clients that are not browsers)."""
        return f"{self.cookie}={self.token}"

    def signed_in(self, cookie_headers: Iterable[str]) -> bool:
        """Whether one of the request's ``Cookie`` headers holds this server's cookie with the secret."""
        found = False
        for header in cookie_headers:
            for pair in header.split(";"):
                name, _, value = pair.strip().partition("=")
                if name == self.cookie and same(value.strip().strip('"'), self.token):
                    found = True  # every candidate is compared: the time taken does not say which matched
        return found

    def admit(
        self, method: str, path: str, query: str, cookie_headers: Iterable[str], fetch_site: str | None
    ) -> Response | None:
        """``None`` where the request may go on; else the answer to send instead: ``403``, or the sign-in (a GET
        or HEAD whose query holds the right ``token``: the cookie set, and the way on to the page without it)."""
        pairs = parse_qsl(query, keep_blank_values=True)
        given = [value for name, value in pairs if name == TOKEN]
        if not given or method not in ("GET", "HEAD"):
            return None if self.signed_in(cookie_headers) else _plain(403, _REFUSED)
        if len(given) != 1 or not same(given[0], self.token):
            return _plain(403, "403 Forbidden: wrong token.\n" + _REFUSED.partition("\n")[2])
        rest = [(name, value) for name, value in pairs if name != TOKEN]
        clean = "/" + quote(
            path.lstrip("/"), safe="/%:@!$&'()*+,;=-._~"
        )  # never //host: stays on this server
        if rest:
            clean += "?" + urlencode(rest)
        cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        headers = {**SECURITY_HEADERS, "Set-Cookie": cookie}
        if fetch_site in _OWN:
            return Response(303, HTML, b"", {**headers, "Location": clean})
        # Sent here from another page: the browser would not send a SameSite=Strict cookie on a redirect of that
        # navigation, so a page of this server's goes on instead (a navigation the browser counts as ours).
        shown = html.escape(clean, quote=True)
        body = (
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="refresh" content="0; url={shown}">\n<title>Aeon</title></head>\n'
            f'<body><p><a href="{shown}">Go on to the page</a></p></body></html>\n'
        )
        return Response(200, HTML, body.encode(), headers)
