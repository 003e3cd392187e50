"""Panel lists come in pages: a long history (tickets, triggers, sessions) never makes one
huge page. Each list on a page has its own query parameter, so paging one list keeps the
others where they are."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.paginator import Paginator

PER_PAGE = 50


@dataclass(frozen=True)
class Pager:
    items: list
    number: int
    num_pages: int
    count: int
    prev_url: str | None
    next_url: str | None


def paged(request, items, *, param: str = "page", per_page: int = PER_PAGE) -> Pager:
    """One page of `items` (a queryset or list), chosen by `?<param>=N`; a missing, bad or
    out-of-range number shows the nearest page rather than an error."""
    page = Paginator(items, per_page).get_page(request.GET.get(param))

    def url(number: int) -> str:
        query = request.GET.copy()
        query[param] = str(number)
        return f"?{query.urlencode()}"

    return Pager(
        items=list(page.object_list), number=page.number,
        num_pages=page.paginator.num_pages, count=page.paginator.count,
        prev_url=url(page.previous_page_number()) if page.has_previous() else None,
        next_url=url(page.next_page_number()) if page.has_next() else None,
    )
