"""Federation: many metastores presented as one catalog (the proxy), and user-created remotes."""
