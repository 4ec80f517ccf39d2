module flotilla.dev/flotilla/tests/csr-oracle

go 1.26.0
