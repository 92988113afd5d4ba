"""Which of the URLs a tracker attaches to an issue are pull requests: its `links`."""

from __future__ import annotations

from legion.core.marks import pull_request_links


def test_only_pull_request_pages_are_kept_each_once_in_order() -> None:
    urls = [
        "https://github.com/acme/widgets/pull/12",
        "https://acme.slack.com/archives/C1/p1",
        "https://github.com/acme/widgets/issues/3",
        " https://ghe.example.com/acme/widgets/pull/7/ ",
        "https://github.com/acme/widgets/pull/12",  # again
        "https://github.com/acme/widgets/pull/12/files",  # a tab of the page, not the page
        "https://github.com/acme/widgets/pull/0",
        "https://github.com/acme/widgets/pull/12#discussion_r1",
        "ftp://github.com/acme/widgets/pull/5",
        "github.com/acme/widgets/pull/6",  # no scheme: not a URL
        "http://[::1/acme/widgets/pull/8",  # unreadable
        "",
    ]
    assert pull_request_links(urls) == (
        "https://github.com/acme/widgets/pull/12",
        "https://ghe.example.com/acme/widgets/pull/7/",
        "https://github.com/acme/widgets/pull/12#discussion_r1",
    )
