"""The router loads an API's module on the first request of its key, while ApiVersions advertises
every API from the static table broker/apis/__init__.py SERVED; the table must say exactly what the
modules declare."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from types import SimpleNamespace

import pytest

from kbroker.broker import apis
from kbroker.broker.apis import HELPERS, SERVED
from kbroker.broker.network.router import Router


def test_the_table_lists_every_api_module_with_its_key_and_versions():
    modules = {m.name for m in pkgutil.iter_modules(apis.__path__)} - set(HELPERS)
    assert {name for name, _, _ in SERVED.values()} == modules, "an API module missing from SERVED, or a stale entry"
    for api_key, (name, low, high) in SERVED.items():
        module = importlib.import_module(f"kbroker.broker.apis.{name}")
        assert (module.API_KEY, tuple(module.VERSIONS)) == (api_key, (low, high)), name


def _in_fresh_interpreter(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_building_the_router_imports_no_handler_and_a_request_imports_only_its_own():
    seen = _in_fresh_interpreter("""
import json, sys
from kbroker.broker.app import build_router
from kbroker.broker.apis import SERVED
router = build_router()
handlers = {f"kbroker.broker.apis.{name}" for name, _, _ in SERVED.values()}
before = sorted(m for m in sys.modules if m in handlers)
advertised = router.supported()
route = router.route(3)
after = sorted(m for m in sys.modules if m in handlers)
from kbroker.broker.apis import metadata
print(json.dumps({"before": before, "after": after, "advertised": advertised,
                  "wrapped": route.handler is not metadata.handle, "again": router.route(3) is route}))
""")
    assert seen["before"] == []
    assert seen["after"] == ["kbroker.broker.apis.metadata"]
    assert [tuple(x) for x in seen["advertised"]] == [(k, low, high) for k, (_, low, high) in sorted(SERVED.items())]
    assert seen["wrapped"], "a lazily loaded route still gets its ACL check"
    assert seen["again"]


def _module(api_key: int, versions: tuple[int, int]) -> SimpleNamespace:
    async def handle(ctx, request):
        return None

    return SimpleNamespace(API_KEY=api_key, VERSIONS=versions, handle=handle)


def test_a_lazy_route_loads_once_and_is_wrapped_like_a_loaded_one():
    loads = []
    router = Router()
    router.register(_module(18, (0, 4)))
    router.register_lazy(12, 0, 4, lambda: loads.append(12) or _module(12, (0, 4)))
    wrapped = []
    router.wrap_routes(lambda route: wrapped.append(route.api_key) or route)
    assert wrapped == [18] and loads == []
    assert router.supported() == [(12, 0, 4), (18, 0, 4)]
    assert router.route(12).max_version == 4
    assert router.route(12) is router.route(12)
    assert loads == [12] and wrapped == [18, 12]
    assert router.route(99) is None


def test_a_module_that_declares_other_versions_than_advertised_is_refused():
    router = Router()
    router.register_lazy(12, 0, 4, lambda: _module(12, (0, 3)))
    with pytest.raises(RuntimeError, match="advertises api 12 versions"):
        router.route(12)
