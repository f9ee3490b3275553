-- ParkWise backend tables as the bridge relies on them (../shared/context/parkwise-backend-facts.md),
-- with the seeded garage: P1 zones A-C x 20, P2 and P3 zones A-B x 24 = 156 spots. For tests and the
-- demo only: the real backend creates its own schema; `parkwise-bridge migrate` then extends it.
CREATE TABLE users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email text UNIQUE NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now());

CREATE TABLE levels (
  code text PRIMARY KEY,
  name text NOT NULL,
  sort int NOT NULL,
  underground boolean NOT NULL);

CREATE TABLE spots (
  id text PRIMARY KEY,
  level_code text NOT NULL REFERENCES levels(code),
  zone text NOT NULL,
  code text NOT NULL,
  is_accessible boolean NOT NULL DEFAULT false,
  is_ev boolean NOT NULL DEFAULT false,
  is_vip boolean NOT NULL DEFAULT false,
  x_m real NOT NULL DEFAULT 0,
  y_m real NOT NULL DEFAULT 0,
  status text NOT NULL DEFAULT 'free' CHECK (status IN ('free', 'reserved', 'occupied', 'disabled')),
  held_by uuid NULL REFERENCES users(id) ON DELETE SET NULL,
  source text NULL CHECK (source IN ('sim', 'user')),
  updated_at timestamptz NOT NULL DEFAULT now());

CREATE TABLE reservations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NULL REFERENCES users(id),
  spot_id text NOT NULL REFERENCES spots(id),
  source text NOT NULL CHECK (source IN ('user', 'sim')),
  status text NOT NULL CHECK (status IN ('active', 'fulfilled', 'released', 'cancelled', 'expired')),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  checked_in_at timestamptz NULL,
  released_at timestamptz NULL);
CREATE UNIQUE INDEX one_active_per_user ON reservations (user_id) WHERE status = 'active' AND user_id IS NOT NULL;
CREATE UNIQUE INDEX one_open_per_spot ON reservations (spot_id)
  WHERE status IN ('active', 'fulfilled') AND released_at IS NULL;

CREATE TABLE occupancy_snapshots (
  level_code text NOT NULL REFERENCES levels(code),
  taken_at timestamptz NOT NULL,
  total int NOT NULL,
  free int NOT NULL,
  reserved int NOT NULL,
  occupied int NOT NULL,
  source text NOT NULL,
  PRIMARY KEY (level_code, taken_at));

CREATE TABLE telemetry_events (
  id bigserial PRIMARY KEY,
  user_id uuid NULL REFERENCES users(id),
  name text NOT NULL,
  properties jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now());

INSERT INTO levels (code, name, sort, underground) VALUES
  ('P1', 'Level 1', 1, false), ('P2', 'Level -1', 2, true), ('P3', 'Level -2', 3, true);

-- Spot id <level>-<zone>-<nn>, code <zone>-<nn>; in every zone 01 is accessible, 02 EV, 03 VIP.
INSERT INTO spots (id, level_code, zone, code, is_accessible, is_ev, is_vip, x_m, y_m)
SELECT l.code || '-' || z.zone || '-' || lpad(n::text, 2, '0'), l.code, z.zone, z.zone || '-' || lpad(n::text, 2, '0'),
       n = 1, n = 2, n = 3, n * 2.5, ascii(z.zone) - 64
FROM (VALUES ('P1', 20, 3), ('P2', 24, 2), ('P3', 24, 2)) AS l(code, per_zone, zones)
CROSS JOIN LATERAL (SELECT chr(64 + g) AS zone FROM generate_series(1, l.zones) g) z
CROSS JOIN LATERAL generate_series(1, l.per_zone) n;
