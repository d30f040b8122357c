"""The Dash app: :func:`create_app` (a factory, callbacks on the app) over the page registry.

Every page is a module with ``PATH``, ``TITLE``, ``layout(ctx)`` (a
:class:`~viewer.registry.PageContext` -> its components, data in place) and
``register_callbacks(app, registry)`` (its interactions, with ``app.callback``). :data:`PAGES`
lists them in tab order: routing, the tabs and the every-page test all read it, so a page is
added by writing its module and listing it here. This module holds only the shell (header,
tabs, the open-profile button) and the routing. The app serves no endpoint of its own: nothing
reads a path that came from the browser; uploads are parsed from memory (:mod:`viewer.loading`).
"""
from __future__ import annotations

import functools
from pathlib import Path

from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from gradtrace.profiler import ProfileData

from . import (compare_page, fwdbwd_page, graph_page, history_page, kernels_page, memory_page, modules_page,
               operators_page, overview_page, ranks_page, timeline_page)
from .cache import warm
from .components import empty_page, error_box
from .loading import DEFAULT_MAX_UPLOAD_MB, UploadError, decode_upload, load_path
from .model import ProfileView
from .registry import MAIN, PageContext, Registry

__all__ = ["create_app", "PAGES", "WARM_AT_LOAD", "MAIN", "ASSETS", "warm_up"]

ASSETS = Path(__file__).with_name("assets")
# The pages, in tab order (Ranks last).
PAGES = [overview_page, operators_page, fwdbwd_page, modules_page, timeline_page, graph_page, memory_page,
         compare_page, kernels_page, history_page, ranks_page]
# The pages whose layouts (and the analyses under them) are built at load, in this order: the
# first page a visitor sees, then the costliest; the Ranks page's summary (seconds for a run
# folder) only when a run folder is open: for one profile it is a table of its own steps,
# built when asked for, not beside the others at start-up (server memory at 10M events).
WARM_AT_LOAD = [overview_page, operators_page, timeline_page, ranks_page]


def create_app(profile_or_path: ProfileData | str | Path | None = None, *, compare=None,
               max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB, title: str = "gradtrace", ranks: dict | None = None,
               store=None) -> Dash:
    """Build the dashboard for a profile.

    Args:
        profile_or_path: a :class:`profiler.ProfileData`, a path to a ``.gtprof`` file, or
            None (the page then asks for an upload). A file that cannot be read gives an
            error message in the page.
        compare: optionally a second profile (or path) preloaded on the Compare page.
        max_upload_mb: largest file accepted by the upload buttons.
        title: browser tab title.
        ranks: a run folder's :func:`profiler.ranks.summarize_run` for the Ranks page
            (:func:`viewer.ranks_page.open_run`); without it the page shows the open profile.
        store: the run store (a path) of the History page (:mod:`viewer.history_page`).
    Returns:
        The ``dash.Dash`` app (``app.server`` is the Flask server).
    """
    registry = Registry(max_upload_mb=max_upload_mb, ranks=ranks, history=store)
    startup_error = None
    if profile_or_path is not None:
        try:
            registry.add(_as_view(profile_or_path), MAIN)
        except UploadError as exc:
            startup_error = str(exc)
    compare_key = None
    if compare is not None:
        try:
            compare_key = registry.add(_as_view(compare))
        except UploadError as exc:
            startup_error = str(exc)

    app = Dash(__name__, assets_folder=str(ASSETS), serve_locally=True, title=title,
               suppress_callback_exceptions=True, update_title=None)
    # An upload arrives base64-encoded in a callback body: cap requests a little above that.
    app.server.config["MAX_CONTENT_LENGTH"] = registry.max_bytes * 4 // 3 + (1 << 20)
    app.layout = _shell(app, registry.get(MAIN), startup_error, max_upload_mb, compare_key)
    _register_shell(app, registry)
    for page in PAGES:
        page.register_callbacks(app, registry)
    app.gradtrace_registry = registry       # for warm_up and the tests; never sent to a browser
    return app


def warm_up(app: Dash):
    """Start building the pages of :data:`WARM_AT_LOAD` for the startup profile in a background
    thread (the Overview, the operator table, the timeline index, the ranks summary), so the
    first visitors do not wait for them. A request that needs one before it is done waits for
    it: nothing is computed twice (:mod:`viewer.cache`).

    Returns:
        The thread, or None without a profile.
    """
    registry = app.gradtrace_registry
    view = registry.get(MAIN)
    if view is None:
        return None
    ctx = PageContext(view, registry)
    return warm([functools.partial(page.layout, ctx) for page in WARM_AT_LOAD
                 if page is not ranks_page or registry.ranks is not None])


def _as_view(profile_or_path) -> ProfileView:
    if isinstance(profile_or_path, ProfileView):
        return profile_or_path
    if isinstance(profile_or_path, ProfileData):
        profile_or_path.analysis  # noqa: B018 - analyse up front
        return ProfileView(profile_or_path, "profile")
    path = Path(profile_or_path)
    return ProfileView(load_path(path), path.name)


def _nav_id(page) -> str:
    return f"nav-{page.PATH.strip('/') or 'overview'}"


def _shell(app: Dash, view: ProfileView | None, error: str | None, max_upload_mb: float, compare_key):
    nav = [dcc.Link(page.TITLE, href=app.get_relative_path(page.PATH), id=_nav_id(page), className="gt-tab")
           for page in PAGES]
    return html.Div(className="gt-app", children=[
        dcc.Location(id="url"),
        dcc.Store(id="profile-key", data=MAIN if view is not None else None),
        dcc.Store(id="compare-key", data=compare_key),
        html.Header(className="gt-header", children=[
            html.Div(className="gt-brand", children=[html.Span("gradtrace", className="gt-logo"),
                                                     html.Span("profile viewer", className="gt-sub")]),
            html.Div(view.label if view else "no profile", id="profile-label", className="gt-profile-label"),
            html.Span(f"Open profile… reads files up to {max_upload_mb:g} MB; for a bigger one, "
                      "run gradtrace view FILE", className="gt-sub", id="open-limit"),
            dcc.Upload(id="open-upload", max_size=int(max_upload_mb * 1e6), multiple=False,
                       className="gt-open", children=html.Button("Open profile…", className="gt-button")),
        ]),
        html.Nav(nav, className="gt-nav", id="gt-nav"),
        html.Div(error_box(error) if error else None, id="open-error", className="gt-error-slot"),
        dcc.Loading(html.Main(id="page", className="gt-page"), type="dot", delay_show=400),
    ])


def _register_shell(app: Dash, registry: Registry) -> None:
    """Routing (the URL picks a page of :data:`PAGES`), the active tab, the open-profile button."""
    route = {app.get_relative_path(page.PATH).rstrip("/") or "/": page for page in PAGES}

    def page_of(pathname):
        return route.get((pathname or "/").rstrip("/") or "/", PAGES[0])

    @app.callback(Output("page", "children"), Input("url", "pathname"), Input("profile-key", "data"),
                  State("compare-key", "data"))
    def render_page(pathname, key, compare_key):
        view = registry.get(key)
        if view is None:
            return empty_page("Open a profile to start.")
        return page_of(pathname).layout(PageContext(view, registry, compare_key))

    @app.callback([Output(_nav_id(page), "className") for page in PAGES], Input("url", "pathname"))
    def highlight_tab(pathname):
        current = page_of(pathname)
        return ["gt-tab gt-tab-active" if page is current else "gt-tab" for page in PAGES]

    @app.callback(Output("profile-key", "data"), Output("profile-label", "children"),
                  Output("open-error", "children"), Input("open-upload", "contents"),
                  State("open-upload", "filename"), prevent_initial_call=True)
    def open_profile(contents, filename):
        if contents is None:
            raise PreventUpdate     # no file chosen yet
        try:
            data = decode_upload(contents, filename, registry.max_bytes)
        except UploadError as exc:
            return no_update, no_update, error_box(str(exc))
        view = ProfileView(data, Path(str(filename or "upload")).name)
        return registry.add(view), view.label, None
