from tests.integration.conftest import aclient, client, server

__all__ = ["aclient", "client", "server"]
