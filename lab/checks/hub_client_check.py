"""What ``huggingface_hub.hf_hub_download`` and cselab's own downloader
(``cselab.data.papers.http_fetch.download_file``) do when the server refuses the connection: how long each takes to say
so, how many lines its error has, and what each leaves in the directory it was asked to download into (``local_dir``
for the hub's client, ``--to DIR``'s place for cselab's). The measurement behind ``http_fetch``'s choice of its own
code for the papers' files.

    python -m lab.checks.hub_client_check

The refused server is a loopback port nothing listens on (``HF_ENDPOINT=http://127.0.0.1:PORT``); nothing leaves the
machine. Appends a record to lab/results/hub_client_check.jsonl.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from lab.record import RESULTS_DIR, append_record

REPO, FILE = "princeton-nlp/datasets-for-simcse", "wiki1m_for_simcse.txt"


def _free_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there afterwards
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _left(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    port = _free_port()
    os.environ["HF_ENDPOINT"] = f"http://127.0.0.1:{port}"
    import huggingface_hub
    from huggingface_hub import hf_hub_download

    from cselab.data.papers.http_fetch import download_file
    from cselab.errors import CselabError

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HF_HOME"] = str(Path(tmp) / "hf-home")
        for client in ("huggingface_hub local_dir", "huggingface_hub cache", "cselab download_file"):
            to = Path(tmp) / client.replace(" ", "-") / "to"
            start = time.monotonic()
            try:
                if client == "huggingface_hub local_dir":
                    hf_hub_download(REPO, FILE, repo_type="dataset", local_dir=to)
                elif client == "huggingface_hub cache":
                    hf_hub_download(REPO, FILE, repo_type="dataset")
                else:
                    url = f"http://127.0.0.1:{port}/datasets/{REPO}/resolve/main/{FILE}"
                    download_file(url, to / FILE, hint="by hand", check=lambda path: None)
                message = "no error"
            except (CselabError, OSError, ValueError) as exc:  # the hub's errors are OSErrors
                message = str(exc)
            rows.append({"client": client, "seconds_to_error": round(time.monotonic() - start, 1),
                         "error_lines": len(message.strip().splitlines()), "left_in_directory": _left(to),
                         "left_in_hf_home": _left(Path(tmp) / "hf-home")})
    for row in rows:
        print(row)
    append_record(RESULTS_DIR / "hub_client_check.jsonl",
                  {"study": "hub_client_check", "huggingface_hub": huggingface_hub.__version__, "rows": rows},
                  __file__, argv)


if __name__ == "__main__":
    main()
