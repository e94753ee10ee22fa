"""discoverd seen through the Python `varlink` package: a client and IDL parser nobody here wrote."""
import pytest
import varlink

INTERFACES = ["org.varlink.service", "io.discoverd.Resolver", "io.discoverd.Discovery", "io.discoverd.Daemon"]


def address(daemon):
    return "unix:" + daemon.socket


def test_get_info_lists_every_interface(daemon):
    with varlink.Client(address=address(daemon)) as client:
        info = client.get_interfaces()
    assert sorted(info) == sorted(INTERFACES)


@pytest.mark.parametrize("name", INTERFACES)
def test_interface_descriptions_parse_with_the_reference_parser(daemon, name):
    with varlink.Client(address=address(daemon)) as client:
        with client.open("org.varlink.service") as service:
            description = service.GetInterfaceDescription(name)["description"]
    interface = varlink.Interface(description)
    assert interface.name == name
    assert len(interface.members) > 0


def test_every_api_method_is_declared(daemon):
    expected = {
        "io.discoverd.Resolver": {
            "ResolveHTTPS", "ResolveSVCB", "ResolveAddresses", "ConnectionPlan", "ReportAltSvc", "Flush",
        },
        "io.discoverd.Discovery": {
            "Browse", "Resolve", "Advertise", "UpdateAdvertisement", "Withdraw", "BrowseTypes", "BrowseDomains",
        },
        "io.discoverd.Daemon": {"Status", "Reload"},
    }
    with varlink.Client(address=address(daemon)) as client:
        for name, methods in expected.items():
            interface = client.get_interface(name)
            declared = {m for m, member in interface.members.items() if isinstance(member, varlink.scanner._Method)}
            assert methods <= declared, f"{name} lacks {methods - declared}"


def test_status_through_the_generated_proxy(daemon):
    with varlink.Client(address=address(daemon)) as client:
        with client.open("io.discoverd.Daemon") as proxy:
            status = proxy.Status()
    assert status["version"]
    assert status["avahi"] in ("running", "connecting", "unavailable")
    assert status["upstreams"] == ["127.0.0.1:9"]
    assert set(status["cache"]) == {"entries", "hits", "misses", "staleServed", "refreshes", "refreshFailures"}
    assert status["connections"] >= 1


def test_streaming_status_with_more(daemon):
    with varlink.Client(address=address(daemon)) as client:
        with client.open("io.discoverd.Daemon") as proxy:
            replies = []
            for reply in proxy.Status(intervalMs=10, _more=True):
                replies.append(reply)
                if len(replies) == 3:
                    break
    assert len(replies) == 3
    assert all(r["version"] for r in replies)


def test_errors_arrive_as_varlink_errors(daemon):
    with varlink.Client(address=address(daemon)) as client:
        with client.open("org.varlink.service") as service:
            with pytest.raises(varlink.VarlinkError) as raised:
                service.GetInterfaceDescription("io.example.Nope")
    assert raised.value.error() == "org.varlink.service.InterfaceNotFound"


def test_sigterm_exits_zero(daemon):
    assert daemon.stop() == 0
