"""The server's own controllers: garbage collection, namespaces, APIServices, CSR signing, bootstrap."""
