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

-- The backend's unmet demand (one row per signed-in user per 15-minute slot while GET /levels says campusFull).
CREATE TABLE unmet_demand (
  id bigserial PRIMARY KEY,
  user_id uuid NOT NULL,
  slot_start timestamptz NOT NULL,
  weekday int NOT NULL,
  zone text NOT NULL,
  UNIQUE (user_id, slot_start));

-- The backend's own writes, as its API makes them (parkwise-backend-facts.md, "What the API does with these
-- tables"), so tests make them as the app would. Every reservation call runs the expiry first, as the API does.

-- Expiry: active past expires_at -> expired; its spot, if still reserved, free and no longer held.
CREATE FUNCTION api_expire() RETURNS void LANGUAGE sql AS $$
  WITH expired AS (
    UPDATE reservations SET status = 'expired' WHERE status = 'active' AND expires_at < now() RETURNING spot_id)
  UPDATE spots SET status = 'free', held_by = NULL, source = NULL, updated_at = now()
  WHERE id IN (SELECT spot_id FROM expired) AND status = 'reserved';
$$;

-- Create (POST /reservations): only a free spot; one_open_per_spot / one_active_per_user refuse the rest (23505: 409).
CREATE FUNCTION api_reserve(p_user uuid, p_spot text, p_hold interval DEFAULT interval '15 minutes')
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE r uuid;
BEGIN
  PERFORM api_expire();
  PERFORM 1 FROM spots WHERE id = p_spot AND status = 'free' FOR UPDATE;
  IF NOT FOUND THEN RAISE EXCEPTION 'spot % is not free', p_spot USING ERRCODE = 'P0409'; END IF;
  INSERT INTO reservations (user_id, spot_id, source, status, expires_at)
  VALUES (p_user, p_spot, 'user', 'active', now() + p_hold) RETURNING id INTO r;
  UPDATE spots SET status = 'reserved', held_by = p_user, source = 'user', updated_at = now() WHERE id = p_spot;
  RETURN r;
END $$;

-- Check-in from the app ("I parked", POST /reservations/:id/check-in): refused unless active and not expired.
CREATE FUNCTION api_check_in(p_reservation uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r reservations;
BEGIN
  PERFORM api_expire();
  SELECT * INTO r FROM reservations WHERE id = p_reservation FOR UPDATE;
  IF r.status IS DISTINCT FROM 'active' THEN RAISE EXCEPTION 'reservation is %', r.status USING ERRCODE = 'P0409'; END IF;
  IF r.expires_at <= now() THEN RAISE EXCEPTION 'reservation expired' USING ERRCODE = 'P0410'; END IF;
  UPDATE reservations SET status = 'fulfilled', checked_in_at = now() WHERE id = p_reservation;
  UPDATE spots SET status = 'occupied', source = 'user', updated_at = now() WHERE id = r.spot_id AND held_by = r.user_id;
END $$;

-- Release (POST /reservations/:id/release): active -> cancelled, fulfilled -> released; the spot free.
CREATE FUNCTION api_release(p_reservation uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r reservations;
BEGIN
  PERFORM api_expire();
  SELECT * INTO r FROM reservations WHERE id = p_reservation FOR UPDATE;
  IF r.status = 'active' THEN
    UPDATE reservations SET status = 'cancelled', released_at = now() WHERE id = p_reservation;
  ELSIF r.status = 'fulfilled' AND r.released_at IS NULL THEN
    UPDATE reservations SET status = 'released', released_at = now() WHERE id = p_reservation;
  ELSE
    RAISE EXCEPTION 'reservation is %', r.status USING ERRCODE = 'P0409';
  END IF;
  UPDATE spots SET status = 'free', held_by = NULL, source = NULL, updated_at = now()
  WHERE id = r.spot_id AND held_by = r.user_id;
END $$;

-- Level summary (GET /levels): per level total = spots not disabled, and the counts; campus_full = every level has
-- free = 0 (a level with total = 0 counts as full).
CREATE FUNCTION api_levels() RETURNS TABLE (code text, total bigint, free bigint, reserved bigint, occupied bigint,
                                             campus_full boolean) LANGUAGE sql AS $$
  WITH l AS (
    SELECT lv.code, lv.sort, count(sp.id) FILTER (WHERE sp.status <> 'disabled') AS total,
           count(sp.id) FILTER (WHERE sp.status = 'free') AS free,
           count(sp.id) FILTER (WHERE sp.status = 'reserved') AS reserved,
           count(sp.id) FILTER (WHERE sp.status = 'occupied') AS occupied
    FROM levels lv LEFT JOIN spots sp ON sp.level_code = lv.code GROUP BY lv.code, lv.sort)
  SELECT code, total, free, reserved, occupied, bool_and(free = 0) OVER () FROM l ORDER BY sort;
$$;
