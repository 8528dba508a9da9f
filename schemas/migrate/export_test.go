package migrate

// ApplyMigrations exposes apply to the external tests, which need to apply a
// changed or extended list of migrations to a real server.
var ApplyMigrations = apply
