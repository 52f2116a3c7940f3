"""The transports: the gRPC server (grpc/) and Connect over HTTP (connect/), both thin
layers over the same memory service."""
