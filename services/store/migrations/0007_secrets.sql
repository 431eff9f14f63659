-- Users' secrets (SecretStore): `sealed` is the value encrypted by the run manager
-- (AES-256-GCM with the key it is given); `body` is the Secret message without the value.
CREATE TABLE secrets (
  user_name   text NOT NULL,
  name        text NOT NULL,
  body        bytea NOT NULL,
  sealed      bytea NOT NULL,
  PRIMARY KEY (user_name, name)
);
