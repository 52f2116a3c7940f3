"""The memory service over Connect on the HTTP port: the gRPC servicer and interceptors
(api/grpc/) serving a second transport (docs/design.md, "One contract, two transports")."""
