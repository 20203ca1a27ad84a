"""The proxy's routing table (:data:`hivemesh.federation.routes.ROUTES`): it lists every HMS method,
agrees with the argument plans the rewriting works from, and is what the handler answers by."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import MetaException, Partition

from hivemesh.federation.access import is_read, is_write
from hivemesh.federation.config import FederationConfig
from hivemesh.federation.explain import offline_calls
from hivemesh.federation.handler import Federation
from hivemesh.federation.members import Member, MemberIndexes
from hivemesh.federation.rewrite import method_plan
from hivemesh.federation.routes import ROUTES, Strategy, methods_of, route_of
from hivemesh.hive.hms_methods import METHODS, implemented_methods

CONFIG = {
    "primary": {"name": "main", "uris": ["thrift://127.0.0.1:1"]},
    "federated": [
        {
            "name": "fed",
            "uris": ["thrift://127.0.0.1:2"],
            "database_prefix": "prefix_",
            "access_control": "read_and_write_on_database_whitelist",
            "writable_database_white_list": ["sales"],
        }
    ],
}


def _arg_names(method: str) -> tuple[str, ...]:
    """The arguments the rewriting finds database names in, in call order."""
    plan = method_plan(method)
    args_cls = getattr(ThriftHiveMetastore, f"{method}_args", None)
    spec = [f for f in (getattr(args_cls, "thrift_spec", None) or ()) if f]
    return tuple(spec[i][2] for i in sorted([i for i, _ in plan.db_args] + [i for i, _ in plan.struct_args]))


@pytest.fixture
def fed() -> Iterator[Federation]:
    cfg = FederationConfig.model_validate(CONFIG)
    f = Federation(offline_calls(cfg).registry, None, MemberIndexes())
    try:
        yield f
    finally:
        f.close()


def test_every_method_of_the_interface_has_exactly_one_row() -> None:
    iface = {n for n in dir(ThriftHiveMetastore.Iface) if not n.startswith("_")}
    assert set(ROUTES) == iface == METHODS
    assert sorted(ROUTES) == list(ROUTES)  # kept sorted: one place to look
    assert set().union(*(methods_of(s) for s in Strategy)) == set(ROUTES)


def test_database_arguments_are_where_the_rewriting_finds_names() -> None:
    wrong = {m: (r.db_args, _arg_names(m)) for m, r in ROUTES.items() if r.db_args != _arg_names(m)}
    assert wrong == {}
    # a method the table sends by database name does name one; one it sends to the primary does not
    assert {m for m in methods_of(Strategy.BY_DATABASE) if not method_plan(m).names_databases} == set()
    assert {m for m in methods_of(Strategy.PRIMARY) if method_plan(m).names_databases} == set()


def test_spot_checks() -> None:
    assert route_of("add_partitions").strategy is Strategy.BY_DATABASE
    assert route_of("add_partitions").db_args == ("new_parts",) and route_of("add_partitions").writes
    assert route_of("get_table").db_args == ("dbname",) and not route_of("get_table").writes
    for merged in ("get_all_databases", "get_databases", "get_table_meta", "get_all_functions", "set_ugi"):
        assert route_of(merged).strategy is Strategy.MERGED, merged
    for txn in ("open_txns", "commit_txn", "abort_txns", "lock", "check_lock", "unlock", "heartbeat"):
        assert route_of(txn).strategy is Strategy.PER_OWNER, txn
        assert not is_write(txn)
    assert route_of("add_dynamic_partitions").writes
    assert route_of("create_table").strategy is Strategy.REMOTE_LINK
    assert route_of("getVersion").strategy is Strategy.PRIMARY
    assert route_of("get_open_txns").strategy is Strategy.PRIMARY  # names no database
    assert is_write("alter_table") and not is_write("get_config_value") and not is_write("set_ugi")
    with pytest.raises(KeyError):
        route_of("add_partiton")


def test_the_handler_answers_each_method_as_its_row_says(fed: Federation) -> None:
    assert implemented_methods(fed) == METHODS
    parts = {
        Strategy.PER_OWNER: fed.txns,
        Strategy.MERGED: fed.merged_calls,
        Strategy.REMOTE_LINK: fed.link_calls,
    }
    for name, row in ROUTES.items():
        bound = getattr(fed, name)
        owner = parts.get(row.strategy)
        if owner is not None:
            assert bound.__self__ is owner, name
        else:
            assert not hasattr(bound, "__self__") and bound.__name__ == name, name
    routed = methods_of(Strategy.BY_DATABASE) | methods_of(Strategy.PRIMARY)
    assert fed.relay_methods == {m for m in routed if is_read(m)}
    with pytest.raises(AttributeError):
        fed.no_such_method  # noqa: B018


def test_add_partitions_goes_by_the_database_of_its_partitions(
    fed: Federation, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, str, Any]] = []

    def call_member(member: Member, method: str, args: Any, *rest: Any) -> Any:
        sent.append((member.name, method, args))
        return args[0]

    monkeypatch.setattr(fed, "call_member", call_member)
    parts = [Partition(dbName="prefix_sales", tableName="orders", values=[str(i)]) for i in range(3)]
    fed.add_partitions(parts)
    ((member, method, args),) = sent
    assert (member, method) == ("fed", "add_partitions")
    assert [(p.dbName, p.tableName) for p in args[0]] == [("sales", "orders")] * 3  # every partition renamed
    sent.clear()
    fed.get_all_tables("sales")
    assert [(m, a) for m, _, a in sent] == [("main", ["sales"])]
    mixed = [Partition(dbName="prefix_sales", tableName="t"), Partition(dbName="sales", tableName="t")]
    with pytest.raises(MetaException, match="names databases of two metastores"):
        fed.add_partitions(mixed)
