"""The browser client's files over real HTTP: validators and 304s, Cache-Control, versioned URLs cached
for good, gzip by Accept-Encoding, and the bad input a client or a prober sends (unreadable validators,
q=0, paths out of web/)."""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path

import pytest

from server.app import App
from server.edge.http import WEB_ROOT
from server.edge.static import StaticFiles, accepts_gzip, etag_matches
from tests.support import serverutil


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    """One backend is enough: no file served here touches the database."""
    async with serverutil.running_app(f"sqlite+aiosqlite:///{tmp_path}/db.sqlite3") as app:
        yield app


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def _get(port: int, path: str, headers: dict[str, str]) -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.putrequest("GET", path, skip_accept_encoding=True)  # no Accept-Encoding unless given
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return Answer(response.status, dict(response.getheaders()), response.read())
    finally:
        connection.close()


async def get(app: App, path: str, **headers: str) -> Answer:
    return await asyncio.to_thread(_get, app.port, path, {k.replace("_", "-"): v for k, v in headers.items()})


IMPORT_MAP = re.compile(r'<script type="importmap">(.*?)</script>\n *')
VERSION = re.compile(r"\?v=[0-9a-f]{20}")
CACHED_FOR_GOOD = "public, max-age=31536000, immutable"


def without_versions(page: bytes) -> bytes:
    """A served page less its import map and the versions of its links: the file as written."""
    return VERSION.sub("", IMPORT_MAP.sub("", page.decode())).encode()


def import_map(page: bytes) -> dict[str, str]:
    found = IMPORT_MAP.search(page.decode())
    assert found is not None
    imports: dict[str, str] = json.loads(found[1])["imports"]
    return imports


async def test_files_carry_validators_and_revalidate_to_304(app: App) -> None:
    first = await get(app, "/")
    assert first.status == 200 and without_versions(first.body) == (WEB_ROOT / "index.html").read_bytes()
    assert first.headers["Cache-Control"] == "no-cache"  # index.html (and every module) revalidated
    assert first.headers["Vary"] == "Accept-Encoding"
    etag, modified = first.headers["ETag"], first.headers["Last-Modified"]
    assert etag.startswith('"') and etag.endswith('"')
    assert (await get(app, "/index.html")).headers["ETag"] == etag

    for validator in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = await get(app, "/", If_None_Match=validator)
        assert (again.status, again.body) == (304, b""), validator
        assert again.headers["ETag"] == etag and again.headers["Cache-Control"] == "no-cache"
    assert (await get(app, "/", If_Modified_Since=modified)).status == 304
    later = format_datetime(parsedate_to_datetime(modified).replace(year=2099), usegmt=True)
    assert (await get(app, "/", If_Modified_Since=later)).status == 304


@pytest.mark.parametrize(("page", "entry"), [("/", "/app.js"), ("/replay.html", "/replay-page.js")])
async def test_pages_name_every_file_by_a_versioned_url_cached_for_good(
    app: App, page: str, entry: str
) -> None:
    """A page links its stylesheets and entry module by versioned URLs, and its import map sends each
    module's plain path (what the modules import) to one: each is the file as written, cached for a
    year without revalidation; the page itself, a plain name, or a version that is not the file's
    current one (a page from before a restart) is revalidated at each use."""
    body = (await get(app, page)).body
    modules = import_map(body)
    assert set(modules) == {"/" + path.name for path in WEB_ROOT.glob("*.js")}
    links = re.findall(r'(?:src|href)="(/[^"]+\?v=[^"]+)"', body.decode())
    assert {url.partition("?")[0] for url in links} >= {entry, "/style.css"}
    for url in [*links, *modules.values()]:
        path, _, query = url.partition("?")
        answer = await get(app, url)
        assert answer.status == 200 and answer.body == (WEB_ROOT / path.removeprefix("/")).read_bytes()
        assert answer.headers["Cache-Control"] == CACHED_FOR_GOOD, url
        assert query == "v=" + answer.headers["ETag"].strip('"')
    stale = VERSION.sub("?v=0123456789abcdef0123", modules[entry])
    for url in (page, entry, stale, entry + "?x=1"):
        answer = await get(app, url)
        assert answer.status == 200 and answer.headers["Cache-Control"] == "no-cache", url
    assert (await get(app, stale)).body == (WEB_ROOT / entry.removeprefix("/")).read_bytes()


def test_a_changed_module_changes_its_own_url_and_the_pages(tmp_path: Path) -> None:
    """No chain of hashes through the imports: a module's URL follows its own bytes, and the page
    (its import map, so its ETag and date) follows every module's."""
    (tmp_path / "index.html").write_text(
        '<head>\n  <link rel="stylesheet" href="/style.css">\n'
        '  <script type="module" src="/app.js"></script>\n'
        '</head>\n<a href="/">home</a> <a href="/missing.js">gone</a>\n'
    )
    (tmp_path / "app.js").write_text('import { b } from "./b.js";\nconsole.log(b);\n')
    (tmp_path / "b.js").write_text("export const b = 1;\n")
    (tmp_path / "style.css").write_text("body { margin: 0; }\n")
    before = StaticFiles(tmp_path).body("/")
    assert without_versions(before) == (tmp_path / "index.html").read_bytes()  # "/", a missing file: as is
    assert '<script type="importmap">' in before.decode().splitlines()[2]  # before the module script
    (tmp_path / "b.js").write_text("export const b = 2;\n")
    after = StaticFiles(tmp_path).body("/")
    assert import_map(after)["/app.js"] == import_map(before)["/app.js"]
    assert import_map(after)["/b.js"] != import_map(before)["/b.js"]
    assert after != before


@pytest.mark.parametrize(
    "headers",
    [
        {"If_None_Match": '"not-this-one"'},
        {"If_None_Match": "garbage without quotes"},
        {"If_None_Match": '"'},
        {"If_None_Match": "W/"},
        {"If_None_Match": ","},
        {"If_None_Match": '"x"' * 500},
        {"If_Modified_Since": "not a date"},
        {"If_Modified_Since": "Mon, 01 Jan 2001 00:00:00"},  # no zone: not an HTTP date
        {"If_Modified_Since": "Mon, 01 Jan 2001 00:00:00 GMT"},  # before the file
    ],
)
async def test_bad_or_stale_validators_get_the_whole_file(app: App, headers: dict[str, str]) -> None:
    answer = await get(app, "/app.js", **headers)
    assert answer.status == 200 and answer.body == (WEB_ROOT / "app.js").read_bytes()


async def test_if_none_match_decides_alone(app: App) -> None:
    """A current date does not make a 304 when the tag sent names another version (RFC 9110 13.2.2)."""
    modified = (await get(app, "/style.css")).headers["Last-Modified"]
    answer = await get(app, "/style.css", If_None_Match='"old"', If_Modified_Since=modified)
    assert answer.status == 200


async def test_text_files_are_gzipped_when_accepted(app: App) -> None:
    plain = await get(app, "/app.js")
    assert "Content-Encoding" not in plain.headers
    packed = await get(app, "/app.js", Accept_Encoding="gzip, deflate, br")
    assert packed.headers["Content-Encoding"] == "gzip" and packed.headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(packed.body) == plain.body and len(packed.body) < len(plain.body) / 2
    assert int(packed.headers["Content-Length"]) == len(packed.body)
    assert packed.headers["ETag"] != plain.headers["ETag"]  # a distinct variant, a distinct strong tag
    # Either variant's tag revalidates (the content is the same), answered as the variant asked for.
    for tag in (packed.headers["ETag"], plain.headers["ETag"]):
        again = await get(app, "/app.js", Accept_Encoding="gzip", If_None_Match=tag)
        assert again.status == 304 and again.headers["ETag"] == packed.headers["ETag"]
    assert (await get(app, "/", Accept_Encoding="*")).headers["Content-Encoding"] == "gzip"


@pytest.mark.parametrize(
    "accept",
    [
        "gzip;q=0",
        "gzip; q=0.000",
        "*;q=0",
        "br, gzip;q=0, *",
        "identity",
        "gzip;q=abc",
        "gzip;q=2",
        "gzip;q=nan",
        "",
    ],
)
async def test_gzip_is_not_sent_unless_accepted(app: App, accept: str) -> None:
    answer = await get(app, "/app.js", Accept_Encoding=accept)
    assert answer.status == 200 and "Content-Encoding" not in answer.headers
    assert answer.body == (WEB_ROOT / "app.js").read_bytes()


@pytest.mark.parametrize(
    "path",
    [
        "/../pyproject.toml",
        "/%2e%2e/pyproject.toml",
        "/..%2fpyproject.toml",
        "/web/../pyproject.toml",
        "/./index.html/../../pyproject.toml",
        "//etc/passwd",
        "/__init__.py",
        "/package.json",
        "/index.html%00.js",
        "/INDEX.HTML",
    ],
)
async def test_only_the_client_files_are_served(app: App, path: str) -> None:
    answer = await get(app, path, Accept_Encoding="gzip")
    assert answer.status == 404 and b"[project]" not in answer.body and "ETag" not in answer.headers


def test_etag_and_accept_encoding_parsing() -> None:
    assert etag_matches('"abc"', '"abc"') and etag_matches(' W/"abc-gz" ', '"abc"')
    assert not etag_matches('"abcd"', '"abc"') and not etag_matches("abc", '"abc"')
    assert not etag_matches('"ab"c"', '"abc"') and not etag_matches("", '"abc"')
    assert accepts_gzip(["deflate", "GZIP;Q=0.5"]) and accepts_gzip(["x-gzip"])
    assert not accepts_gzip([]) and not accepts_gzip(["gzip;q=-1"]) and not accepts_gzip(["gzip;q=inf"])
    assert accepts_gzip(["gzip;q=0", "gzip;q=1"])  # the best q of a coding named twice
