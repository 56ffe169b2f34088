"""A corpus given by URL (``data.corpus = "https://.../data-books-en_fr.argosdata"``, as
Locomotive takes its sources): downloaded into the data directory once and read as a file of
its name; a failed or interrupted download is one line and leaves nothing that looks whole.
Served by a local HTTP server: no network."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_compressed_corpora import argos_data, quiet, rows

from nmt.config import DataConfig
from nmt.data.corpora import Context, open_corpus
from nmt.data.download import DOWNLOADS
from nmt.errors import DataError


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[str, Path, http.server.ThreadingHTTPServer]]:
    root = tmp_path / "site"
    root.mkdir()
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root, server
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def read(spec: str, data_dir: Path) -> list[tuple[str, str]]:
    return list(open_corpus(spec, Context(DataConfig(), data_dir, log=quiet)).pairs())


def test_a_corpus_url_is_downloaded_once_and_read_as_its_file(
        served: tuple[str, Path, http.server.ThreadingHTTPServer], tmp_path: Path) -> None:
    base, root, server = served
    pairs = rows()[:40]
    argos_data(root / "data-books-en_fr.argosdata", pairs)
    url = f"{base}/data-books-en_fr.argosdata"
    corpus = open_corpus(url, Context(DataConfig(), tmp_path / "data", log=quiet))
    assert list(corpus.pairs()) == pairs
    assert corpus.identity.corpus == url and corpus.identity.form == "argos-data"
    server.shutdown()  # the second time, the download is used: no network needed
    assert read(url, tmp_path / "data") == pairs
    assert [p.name[13:] for p in (tmp_path / "data" / DOWNLOADS).iterdir()] == [
        "data-books-en_fr.argosdata"]


def test_a_failed_download_is_one_line_and_leaves_nothing(
        served: tuple[str, Path, http.server.ThreadingHTTPServer], tmp_path: Path) -> None:
    base, _, _ = served
    with pytest.raises(DataError) as e:
        read(f"{base}/missing.argosdata", tmp_path / "data")
    message = str(e.value)
    assert "\n" not in message and "cannot download" in message and "404" in message
    assert not any((tmp_path / "data" / DOWNLOADS).iterdir())
    with pytest.raises(DataError, match="expected the URL of a corpus file whose name says its "
                                        "form"):
        read(f"{base}/", tmp_path / "data")


@pytest.mark.parametrize("name", ["data-books-en_fr.argosdata", "en-fr.tmx.gz"])
def test_an_error_page_served_as_the_file_is_not_kept(
        served: tuple[str, Path, http.server.ThreadingHTTPServer], tmp_path: Path,
        name: str) -> None:
    base, root, _ = served
    (root / name).write_text("<!DOCTYPE html><p>Not here any more</p>")  # "200 OK"
    with pytest.raises(DataError, match=r"what it served is no .* \(it begins b'<!DOCTYPE "):
        read(f"{base}/{name}", tmp_path / "data")
    assert not any((tmp_path / "data" / DOWNLOADS).iterdir())  # the next try downloads again

