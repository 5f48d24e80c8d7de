"""The web console as a browser meets it, over plain HTTP: its cookies, its forms' tokens and
their `Origin`."""

import re
from http.cookies import SimpleCookie

import httpx


class Browser:
    """The console as a browser sees it: cookies kept by hand (the console's are `Secure`, and
    httpx sends none over plain HTTP, where browsers do for 127.0.0.1), and an `Origin` on
    every form, as browsers send one."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.cookies: dict[str, str] = {}
        self._http = httpx.Client(base_url=url, timeout=30, follow_redirects=False)

    def get(self, path: str) -> httpx.Response:
        return self._send("GET", path)

    def post(
        self, path: str, form: dict[str, str] | None = None, *, origin: str | None = ""
    ) -> httpx.Response:
        """A form post from `origin` (default: the console's own; None: no Origin header)."""
        return self._send(
            "POST", path, form=form or {}, origin=self.url if origin == "" else origin
        )

    def sign_in(self, key: str) -> httpx.Response:
        page = self.get("/console/sign-in")
        return self.post("/console/sign-in", {"api_key": key, "csrf_token": token_of(page)})

    def _send(
        self, method: str, path: str, *, form: dict[str, str] | None = None,
        origin: str | None = None,
    ) -> httpx.Response:  # fmt: skip
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        if origin is not None:
            headers["Origin"] = origin
        self._http.cookies.clear()
        answer = self._http.request(method, path, headers=headers, data=form)
        for header in answer.headers.get_list("set-cookie"):
            parsed: SimpleCookie = SimpleCookie()
            parsed.load(header)
            for name, morsel in parsed.items():
                if morsel["max-age"] == "0":
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = morsel.value
        return answer


def token_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found, f"no form token in {page.text[:300]}"
    return found.group(1)
