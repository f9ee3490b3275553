/// Every statement the bridge runs while applying the feed. Parameters only (`$n`), never spliced
/// values. Row locks on the backend's tables are taken with SKIP LOCKED, as the simulator does, so
/// an API transaction is never waited for: a skipped spot is re-asserted on the next sweep.
enum SQL {
    // MARK: Devices

    /// Every device of a batch is locked at once, in key order (two bridges never deadlock on them), its row created
    /// first when it has none (then all are locked again: a deadlock in that first batch of a device is retried);
    /// their boot and seq are written back once at the end of the batch.
    static let ensureDevices = """
        INSERT INTO sensor_devices (site, device)
        SELECT * FROM unnest($1::text[], $2::text[]) AS w(site, device) ORDER BY 1, 2
        ON CONFLICT (site, device) DO NOTHING
        """

    static let lockDevices = """
        SELECT site, device, boot, last_seq, revoked_at IS NOT NULL FROM sensor_devices
        WHERE (site, device) IN (SELECT * FROM unnest($1::text[], $2::text[]))
        ORDER BY site, device FOR UPDATE
        """

    static let writeCursors = """
        UPDATE sensor_devices d SET boot = w.boot, last_seq = w.last_seq, updated_at = now(), heard_at = now()
        FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS w(site, device, boot, last_seq)
        WHERE d.site = w.site AND d.device = w.device AND (d.boot, d.last_seq) IS DISTINCT FROM (w.boot, w.last_seq)
        """

    /// Returns the storage fault the row held before (the row is locked by the batch already); ends the device's open
    /// outage interval.
    static let online = """
        WITH d AS (
          UPDATE sensor_devices d SET online = true, mode = $3, online_since = $4::timestamptz, offline_since = NULL,
            stale = false, storage_fault = $5, updated_at = now(), status = $6::jsonb, status_at = now(), heard_at = now()
          FROM (SELECT storage_fault FROM sensor_devices WHERE site = $1 AND device = $2) AS before
          WHERE d.site = $1 AND d.device = $2
            -- Older news, when the device numbers its connections ($7 boot, $8 connection): the offline of this
            -- connection or a later one was applied already, or a later connection's online.
            AND NOT coalesce(NOT d.online AND d.offline_boot = $7::bigint AND d.offline_connection >= $8::bigint, false)
            AND NOT coalesce(d.online AND (d.status->>'boot')::bigint = $7::bigint
                             AND (d.status->>'connection')::bigint > $8::bigint, false)
          RETURNING before.storage_fault
        ), ended AS (   -- runs although nothing reads it (PostgreSQL runs every data-modifying WITH)
          UPDATE sensor_device_outages SET ended = now()
          WHERE site = $1 AND device = $2 AND ended IS NULL AND EXISTS (SELECT 1 FROM d)
        )
        SELECT storage_fault FROM d
        """

    /// The device's last will or clean stop: offline, and an outage interval opened (one per device while it lasts);
    /// nothing when a later connection's online ($3 boot, $4 connection) was applied already. Says how many (0 or 1).
    static let offline = """
        WITH d AS (
          UPDATE sensor_devices SET online = false, offline_since = coalesce(offline_since, now()), updated_at = now(),
            offline_boot = $3::bigint, offline_connection = $4::bigint
          WHERE site = $1 AND device = $2
            AND NOT coalesce(online AND (status->>'boot')::bigint = $3::bigint
                             AND (status->>'connection')::bigint > $4::bigint, false)
          RETURNING site, device, offline_since
        ), outage AS (
          INSERT INTO sensor_device_outages (site, device, began) SELECT site, device, offline_since FROM d
          ON CONFLICT (site, device) WHERE ended IS NULL DO NOTHING
        )
        SELECT count(*) FROM d
        """

    /// Another event of the device's with this boot and seq (not this id).
    static let seqUsedByAnotherEvent = """
        SELECT 1 FROM sensor_events WHERE site = $1 AND device = $2 AND boot = $3::bigint AND seq = $4::bigint
          AND id <> $5::uuid LIMIT 1
        """

    /// A device whose state directory was lost counts again from seq 1: its spots' order restarts too.
    static let resetSpotOrder = "UPDATE sensor_spots SET seq = 0, ord = 0 WHERE site = $1 AND device = $2"

    /// Devices offline past the stale timeout, marked once, and the time their outage became one for the apps
    /// (an interval opened before the bridge recorded outages is opened now).
    static let markStale = """
        WITH s AS (
          UPDATE sensor_devices SET stale = true, updated_at = now()
          WHERE NOT online AND NOT stale AND offline_since < now() - make_interval(secs => $1::double precision)
          RETURNING site, device, offline_since
        ), outage AS (
          INSERT INTO sensor_device_outages AS o (site, device, began, stale_at) SELECT site, device, offline_since, now() FROM s
          ON CONFLICT (site, device) WHERE ended IS NULL DO UPDATE SET stale_at = coalesce(o.stale_at, now())
        )
        SELECT site, device FROM s
        """

    static let onlineDevices = "SELECT site, device FROM sensor_devices WHERE online"
    /// This bridge's link to its broker ($1 client id, $2 brokers, $3 connected|lost|stopped), since when it changed.
    static let brokerLink = """
        INSERT INTO sensor_bridges AS b (client_id, brokers, broker_state) VALUES ($1, $2, $3)
        ON CONFLICT (client_id) DO UPDATE SET brokers = EXCLUDED.brokers, broker_state = EXCLUDED.broker_state,
          since = CASE WHEN b.broker_state = EXCLUDED.broker_state THEN b.since ELSE now() END
        """
    /// The feeds known from an online status applied before (a device seen only offline, e.g. a simulator stopped
    /// before this bridge first ran, has none: its retained states wait for its next online, which says its mode).
    static let deviceModes = """
        SELECT site, device, mode, online FROM sensor_devices WHERE online_since IS NOT NULL OR status IS NOT NULL
        """

    // MARK: Events

    /// Dedupe, for a whole batch: a row comes back only for an id not seen before.
    static let insertEvents = """
        INSERT INTO sensor_events (id, site, device, seq, boot, type, at, payload)
        SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[],
                             $7::timestamptz[], $8::jsonb[])
        ORDER BY 1
        ON CONFLICT (id) DO NOTHING
        RETURNING id
        """

    /// An event first stamped `unsynced` comes again `corrected` (NTP set the clock meanwhile): the
    /// corrected times are kept. Returns the payload it replaces (nothing when already corrected).
    static let correctEvent = """
        WITH old AS (SELECT id, payload FROM sensor_events WHERE id = $1::uuid AND payload->>'clock' = 'unsynced' FOR UPDATE)
        UPDATE sensor_events e SET at = $2::timestamptz, payload = $3::jsonb FROM old WHERE e.id = old.id
        RETURNING old.payload::text
        """

    /// Re-dates what an uncorrected time was written into: $1 spot, $2 old time, $3 corrected time, $4 seq.
    static let correctSince = """
        UPDATE sensor_spots SET since = $3::timestamptz WHERE spot_id = $1 AND since = $2::timestamptz AND seq = $4::bigint
        """
    static let correctCheckIn = """
        UPDATE reservations SET checked_in_at = $3::timestamptz
        WHERE id IN (SELECT id FROM reservations
                     WHERE spot_id = $1 AND checked_in_at = $2::timestamptz AND status IN ('fulfilled', 'released')
                       AND $4::bigint > 0
                     FOR UPDATE SKIP LOCKED)
        """
    static let correctArrival = """
        UPDATE sensor_arrivals SET arrival = $3::timestamptz
        WHERE spot_id = $1 AND arrival = $2::timestamptz AND $4::bigint > 0
          AND NOT EXISTS (SELECT 1 FROM sensor_arrivals WHERE spot_id = $1 AND arrival = $3::timestamptz)
        """
    static let correctCheckOut = """
        UPDATE reservations SET released_at = $3::timestamptz
        WHERE id IN (SELECT id FROM reservations WHERE spot_id = $1 AND released_at = $2::timestamptz AND $4::bigint > 0
                     FOR UPDATE SKIP LOCKED)
        """

    static let insertGap = """
        INSERT INTO sensor_gaps (site, device, first_seq, last_seq, declared, dropped)
        VALUES ($1, $2, $3::bigint, $4::bigint, $5::boolean, $6::int)
        """

    /// Detected gaps older than $1 seconds: dropped when their seqs arrived meanwhile (another bridge
    /// had them), else marked checked; returns the devices to ask for a rebirth.
    static let checkGaps = """
        WITH g AS (
          SELECT id, site, device, first_seq, last_seq FROM sensor_gaps
          WHERE NOT declared AND NOT checked AND detected_at < now() - make_interval(secs => $1::double precision)
          FOR UPDATE SKIP LOCKED
        ), filled AS (
          SELECT g.id, (SELECT count(DISTINCT e.seq) FROM sensor_events e
                        WHERE e.site = g.site AND e.device = g.device AND e.seq BETWEEN g.first_seq AND g.last_seq)
                       = g.last_seq - g.first_seq + 1 AS complete
          FROM g
        ), dropped AS (   -- runs although nothing reads it (PostgreSQL runs every data-modifying WITH)
          DELETE FROM sensor_gaps WHERE id IN (SELECT id FROM filled WHERE complete)
        )
        UPDATE sensor_gaps SET checked = true
        WHERE id IN (SELECT id FROM filled WHERE NOT complete)
        RETURNING site, device
        """

    static let insertFault = """
        INSERT INTO sensor_faults (event_id, site, device, subject, input, reason, at)
        VALUES ($1::uuid, $2, $3, $4, $5, $6, $7::timestamptz) ON CONFLICT (event_id) DO NOTHING
        """

    static let recoverFault = """
        UPDATE sensor_faults SET recovered_at = $5::timestamptz
        WHERE site = $1 AND device = $2 AND subject = $3 AND input IS NOT DISTINCT FROM $4 AND recovered_at IS NULL
        """

    // MARK: Spots

    static let knownSpots = "SELECT id FROM spots"
    static let sensorSpotIDs = "SELECT spot_id FROM sensor_spots ORDER BY spot_id"
    static let spotsOfDevices = """
        SELECT spot_id FROM sensor_spots WHERE (site, device) IN (SELECT * FROM unnest($1::text[], $2::text[]))
        """

    /// The sensors' view of the batch's spots (one write per spot, see `SpotWrites`), each kept only
    /// when its order is higher than the stored one (a retained state also at the same order). Another device's
    /// write (the orders of two devices do not compare) takes the spot over once the device that had it is not online:
    /// a board replaced under a new device id, a sensor rewired to another board, a simulator's leftovers; while both
    /// are online the spot stays the first one's. With `spot_owners: registered` ($9 true) every write here is the
    /// spot's registered owner's (the applier refused the others): it takes the spot over from any former one.
    static let sensorSpots = """
        INSERT INTO sensor_spots AS s (spot_id, site, device, state, since, checked_in, seq, ord, updated_at)
        SELECT w.*, now()
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::boolean[], $7::bigint[],
                    $8::bigint[]) AS w(spot_id, site, device, state, since, checked_in, seq, ord)
        ORDER BY w.spot_id
        ON CONFLICT (spot_id) DO UPDATE SET
          site = EXCLUDED.site, device = EXCLUDED.device, state = EXCLUDED.state, since = EXCLUDED.since,
          checked_in = EXCLUDED.checked_in, seq = EXCLUDED.seq, ord = EXCLUDED.ord, updated_at = now()
        WHERE CASE WHEN EXCLUDED.site = s.site AND EXCLUDED.device = s.device
                   THEN EXCLUDED.ord > s.ord OR (EXCLUDED.ord = s.ord AND EXCLUDED.ord % 2 = 1)
                   ELSE $9::boolean
                     OR NOT EXISTS (SELECT 1 FROM sensor_devices d WHERE d.site = s.site AND d.device = s.device AND d.online)
              END
        RETURNING spot_id
        """

    // MARK: - The site's register: who may speak for a spot

    /// A device's register entry ($1 site, $2 device, $3 revoked, $4 rev): kept unless a newer one was applied; a
    /// revocation is for ever and ends the device's online (its spots are made unknown by `forgetSpots`). Returns
    /// whether it is revoked now; no row: an older entry, ignored.
    static let registerDevice = """
        UPDATE sensor_devices SET register_rev = $4::bigint,
          revoked_at = CASE WHEN $3::boolean THEN coalesce(revoked_at, now()) ELSE revoked_at END,
          online = online AND NOT $3::boolean,
          offline_since = CASE WHEN $3::boolean THEN coalesce(offline_since, now()) ELSE offline_since END,
          updated_at = now()
        WHERE site = $1 AND device = $2 AND (register_rev IS NULL OR register_rev <= $4::bigint)
        RETURNING revoked_at IS NOT NULL
        """

    /// The device's spots not in its entry ($3) any more, given by an entry no newer than this one ($4): no longer
    /// its; returns them.
    static let dropOwners = """
        DELETE FROM sensor_spot_owners
        WHERE site = $1 AND device = $2 AND rev <= $4::bigint AND NOT (spot_id = ANY($3::text[]))
        RETURNING spot_id
        """

    /// The entry's spots ($3) are the device's, unless a newer entry gave one to another device.
    static let setOwners = """
        INSERT INTO sensor_spot_owners AS o (spot_id, site, device, rev)
        SELECT DISTINCT unnest($3::text[]), $1, $2, $4::bigint
        ON CONFLICT (spot_id) DO UPDATE SET site = EXCLUDED.site, device = EXCLUDED.device, rev = EXCLUDED.rev,
          assigned_at = CASE WHEN (o.site, o.device) = (EXCLUDED.site, EXCLUDED.device) THEN o.assigned_at ELSE now() END
        WHERE o.rev <= EXCLUDED.rev
        """

    /// What the device had said about spots ($3; NULL: every one, it is revoked) no longer its: unknown, until their
    /// owner reports them.
    static let forgetSpots = """
        UPDATE sensor_spots SET state = 'unknown', since = NULL, checked_in = false, updated_at = now()
        WHERE site = $1 AND device = $2 AND ($3::text[] IS NULL OR spot_id = ANY($3::text[]))
        RETURNING spot_id
        """

    /// The owners of the given spots ($1).
    static let owners = "SELECT spot_id, site, device FROM sensor_spot_owners WHERE spot_id = ANY($1::text[])"

    /// A report of a spot the device does not own ($4 its owner then, NULL: none registered): counted.
    static let refusedSpot = """
        INSERT INTO sensor_refused_spots AS r (site, device, spot_id, owner) VALUES ($1, $2, $3, $4)
        ON CONFLICT (site, device, spot_id) DO UPDATE SET last_seen = now(), reports = r.reports + 1, owner = EXCLUDED.owner
        """

    static let unknownSpot = """
        INSERT INTO sensor_unknown_spots AS u (site, device, spot_id) VALUES ($1, $2, $3)
        ON CONFLICT (site, device, spot_id) DO UPDATE SET last_seen = now(), reports = u.reports + 1
        """

    /// What `spots` should say, for the given spots ($1) and every spot of the given devices ($2 sites, $3 devices,
    /// pairwise), or for all sensor spots ($4). The sensor is the truth about the car, the reservation the truth about
    /// who holds the spot (deploy/backend/README.md, "What the apps see"):
    /// - a car sensed (device not stale): `occupied`;
    /// - else an open reservation (`active`, or `fulfilled` and not released): `reserved` for its user — except a
    ///   `fulfilled` one whose sensor cannot see (unknown, device stale), which stays `occupied` as the app's check-in
    ///   made it: the user's word stands where the sensor has none;
    /// - else a sensor that cannot see: `disabled` (never free); else `free`.
    /// `held_by` is always the open reservation's user (NULL without one): never cleared while a reservation holds the
    /// spot, and a holder left behind by the backend's expiry of a spot it did not free is cleared.
    /// Spots an administrator disabled are left alone.
    static let reassert = """
        WITH want AS (
          SELECT ss.spot_id, o.user_id AS holder,
                 CASE WHEN ss.state = 'occupied' AND NOT coalesce(d.stale, false) THEN 'occupied'
                      WHEN o.status = 'active' THEN 'reserved'
                      WHEN o.status = 'fulfilled' AND ss.state = 'free' AND NOT coalesce(d.stale, false) THEN 'reserved'
                      WHEN o.status = 'fulfilled' THEN 'occupied'
                      WHEN coalesce(d.stale, false) OR ss.state = 'unknown' THEN 'disabled'
                      ELSE 'free' END AS status,
                 coalesce(ss.since, ss.updated_at) AS at
          FROM sensor_spots ss
          LEFT JOIN sensor_devices d ON d.site = ss.site AND d.device = ss.device
          LEFT JOIN LATERAL (SELECT r.status, r.user_id FROM reservations r
                             WHERE r.spot_id = ss.spot_id AND r.status IN ('active', 'fulfilled') AND r.released_at IS NULL
                             ORDER BY r.created_at DESC LIMIT 1) o ON true
          WHERE $4::boolean OR ss.spot_id = ANY($1::text[])
             OR (ss.site, ss.device) IN (SELECT * FROM unnest($2::text[], $3::text[]))
        ), target AS (
          SELECT sp.id, w.status, w.at, w.holder FROM spots sp JOIN want w ON w.spot_id = sp.id
          WHERE NOT (sp.status = 'disabled' AND sp.source IS DISTINCT FROM 'sensor')
            AND (sp.status <> w.status OR sp.source IS DISTINCT FROM 'sensor' OR sp.held_by IS DISTINCT FROM w.holder)
          FOR UPDATE OF sp SKIP LOCKED
        )
        UPDATE spots sp SET status = t.status, source = 'sensor', updated_at = t.at, held_by = t.holder
        FROM target t WHERE sp.id = t.id
        RETURNING sp.id
        """

    // MARK: Reservations

    /// The product's telemetry for reservations the sensors completed (`telemetry_events`, counted by the backend's
    /// analytics): snake_case names, a few properties within the backend's limits. Reads the CTE `done`
    /// (id, user_id, spot_id, created_at, checked_in_at, released_at).
    private static func telemetry(_ name: String, more: String = "") -> String {
        """
        INSERT INTO telemetry_events (user_id, name, properties)
        SELECT done.user_id, '\(name)', jsonb_strip_nulls(jsonb_build_object(
                 'reservation_id', done.id::text, 'spot_id', done.spot_id, 'level', sp.level_code,
                 'lead_s', round(extract(epoch FROM done.checked_in_at - done.created_at)),
                 'stay_s', round(extract(epoch FROM done.released_at - done.checked_in_at))\(more)))
        FROM done LEFT JOIN spots sp ON sp.id = done.spot_id
        """
    }

    /// What an update of reservations returns for `telemetry`, as the CTE `done`.
    private static let done = """
        reservations.id, reservations.user_id, reservations.spot_id, reservations.created_at, reservations.checked_in_at,
        reservations.released_at
        """

    /// The check-in window, exactly the backend's: made at or before the arrival, and not expired at it
    /// (the backend's check-in refuses `expires_at <= now()`).
    private static let inWindow = "created_at <= $2::timestamptz AND $2::timestamptz < expires_at"

    /// A sensed arrival ($1 spot, $2 arrival, $3 site, $4 device), matched once to what holds the spot:
    /// - an `active` reservation whose window holds the arrival: `fulfilled` at the arrival (`sensor_check_in`);
    /// - else a `fulfilled` one the app checked in before the car came (no arrival of its own yet): that reservation's
    ///   arrival, the app's `checked_in_at` kept;
    /// - else none: an unreserved arrival.
    /// Recorded in `sensor_arrivals` (one row per spot and arrival, so an event and the retained states of the same
    /// arrival count once). An active reservation whose row the API holds right now is not waited for and not
    /// recorded: the sweep completes it (`sweepCheckIns`). Returns the kind recorded (nothing: already recorded, or
    /// left to the sweep).
    static let arrived = """
        WITH active AS (
          SELECT id FROM reservations WHERE spot_id = $1 AND status = 'active' AND \(inWindow)
          LIMIT 1 FOR UPDATE SKIP LOCKED
        ), done AS (
          UPDATE reservations SET status = 'fulfilled', checked_in_at = $2::timestamptz FROM active WHERE reservations.id = active.id
          RETURNING \(done)
        ), by_app AS (
          SELECT r.id FROM reservations r
          WHERE r.spot_id = $1 AND r.status = 'fulfilled' AND r.released_at IS NULL AND r.created_at <= $2::timestamptz
            AND NOT EXISTS (SELECT 1 FROM sensor_arrivals a WHERE a.reservation_id = r.id)
            AND NOT EXISTS (SELECT 1 FROM done)
          LIMIT 1
        ), held_by_api AS (
          SELECT 1 FROM reservations WHERE spot_id = $1 AND status = 'active' AND \(inWindow) AND NOT EXISTS (SELECT 1 FROM done)
        ), recorded AS (
          INSERT INTO sensor_arrivals (spot_id, arrival, site, device, kind, reservation_id)
          SELECT $1, $2::timestamptz, $3, $4,
                 CASE WHEN EXISTS (SELECT 1 FROM done) THEN 'checked_in'
                      WHEN EXISTS (SELECT 1 FROM by_app) THEN 'app_checked_in' ELSE 'unreserved' END,
                 coalesce((SELECT id FROM done), (SELECT id FROM by_app))
          WHERE NOT EXISTS (SELECT 1 FROM held_by_api)
          ON CONFLICT (spot_id, arrival) DO NOTHING
          RETURNING kind
        ), told AS (
          \(telemetry("sensor_check_in"))
        )
        SELECT kind FROM recorded
        """

    /// A checked-in vehicle left ($1 spot, $2 departure): its reservation is released at the departure time
    /// (`sensor_check_out`).
    static let checkOut = """
        WITH r AS (
          SELECT id FROM reservations
          WHERE spot_id = $1 AND status = 'fulfilled' AND released_at IS NULL AND checked_in_at <= $2::timestamptz
          LIMIT 1 FOR UPDATE SKIP LOCKED
        ), done AS (
          UPDATE reservations SET status = 'released', released_at = $2::timestamptz FROM r WHERE reservations.id = r.id
          RETURNING \(done)
        ), told AS (
          \(telemetry("sensor_check_out"))
        )
        SELECT id FROM done
        """

    /// A departure the board did not see (issue 36): a spot sensed free with no `since` (a board that restarted, or a
    /// sensor that recovered, knows the car is gone but not since when) ends the sensed check-in of its `fulfilled`
    /// reservation — only one whose car the sensor saw arrive (an app check-in whose car never came is the no-show
    /// rule's). Released at the earliest moment the evidence shows the car gone, with both bounds recorded on its
    /// arrival (`sensor_arrivals.departure_after` / `departure_by`): after the check-in and after the device's last
    /// outage since then began (the car was shown there until then); by that outage's end (the board came back
    /// without it) or else when the free state was applied. Counted as `sensor_check_out` with
    /// `departure_estimated: true`. $1: one spot, or NULL for every spot (the sweep's).
    static let checkOutUntimed = """
        WITH r AS (
          SELECT r.id, a.spot_id, a.arrival, greatest(r.checked_in_at, o.began) AS after,
                 CASE WHEN o.ended > greatest(r.checked_in_at, o.began) THEN least(o.ended, ss.updated_at)
                      ELSE ss.updated_at END AS by
          FROM reservations r
          JOIN sensor_spots ss ON ss.spot_id = r.spot_id
          JOIN LATERAL (SELECT spot_id, arrival FROM sensor_arrivals WHERE reservation_id = r.id
                        ORDER BY arrival DESC LIMIT 1) a ON true
          LEFT JOIN LATERAL (SELECT began, ended FROM sensor_device_outages
                             WHERE site = ss.site AND device = ss.device AND began >= r.checked_in_at
                             ORDER BY began DESC LIMIT 1) o ON true
          WHERE r.status = 'fulfilled' AND r.released_at IS NULL AND ss.state = 'free' AND ss.since IS NULL
            AND ss.updated_at > r.checked_in_at AND ($1::text IS NULL OR r.spot_id = $1::text)
          FOR UPDATE OF r SKIP LOCKED
        ), done AS (
          UPDATE reservations SET status = 'released', released_at = r.by FROM r WHERE reservations.id = r.id
          RETURNING \(done)
        ), marked AS (
          UPDATE sensor_arrivals a SET departure_after = r.after, departure_by = r.by FROM r
          WHERE a.spot_id = r.spot_id AND a.arrival = r.arrival
        ), told AS (
          \(telemetry("sensor_check_out", more: ", 'departure_estimated', true"))
        )
        SELECT id FROM done
        """

    /// The sweep's check-ins: an active reservation on a spot the sensor sees occupied and checked in since an arrival
    /// inside the reservation's window (a check-in skipped while the API held the row).
    static let sweepCheckIns = """
        WITH r AS (
          SELECT r.id, ss.since, ss.site, ss.device FROM reservations r JOIN sensor_spots ss ON ss.spot_id = r.spot_id
          WHERE r.status = 'active' AND ss.state = 'occupied' AND ss.checked_in AND ss.since IS NOT NULL
            AND r.created_at <= ss.since AND ss.since < r.expires_at
          FOR UPDATE OF r SKIP LOCKED
        ), done AS (
          UPDATE reservations SET status = 'fulfilled', checked_in_at = r.since FROM r WHERE reservations.id = r.id
          RETURNING \(done), r.site, r.device
        ), recorded AS (
          INSERT INTO sensor_arrivals AS a (spot_id, arrival, site, device, kind, reservation_id)
          SELECT spot_id, checked_in_at, site, device, 'checked_in', id FROM done
          ON CONFLICT (spot_id, arrival) DO UPDATE SET kind = 'checked_in', reservation_id = EXCLUDED.reservation_id
        ), told AS (
          \(telemetry("sensor_check_in"))
        )
        SELECT id FROM done
        """

    /// The sweep's check-outs: a fulfilled, unreleased reservation on a spot the sensor has seen free since after the
    /// check-in.
    static let sweepCheckOuts = """
        WITH r AS (
          SELECT r.id, ss.since FROM reservations r JOIN sensor_spots ss ON ss.spot_id = r.spot_id
          WHERE r.status = 'fulfilled' AND r.released_at IS NULL AND ss.state = 'free' AND ss.since IS NOT NULL
            AND ss.since > r.checked_in_at
          FOR UPDATE OF r SKIP LOCKED
        ), done AS (
          UPDATE reservations SET status = 'released', released_at = r.since FROM r WHERE reservations.id = r.id
          RETURNING \(done)
        ), told AS (
          \(telemetry("sensor_check_out"))
        )
        SELECT id FROM done
        """

    /// The backend's reservation expiry, exactly its writes (`active` and `expires_at < now()` → `expired`; its spot,
    /// if still `reserved`, `free`, `held_by` NULL, `source` NULL, `updated_at = now()`), run at every sweep: with
    /// OCCUPANCY_SOURCE=none nothing else runs it between reservation API calls. One difference: a hold whose car the
    /// sensor saw arrive inside its window (occupied, not yet checked in: `checkin_after` has not passed) is left
    /// active for its check-in, which fulfils it at that arrival. Returns the expired reservations' spots.
    static let expireHolds = """
        WITH r AS (
          SELECT r.id FROM reservations r
          WHERE r.status = 'active' AND r.expires_at < now()
            AND NOT EXISTS (SELECT 1 FROM sensor_spots ss JOIN sensor_devices d ON d.site = ss.site AND d.device = ss.device
                            WHERE ss.spot_id = r.spot_id AND ss.state = 'occupied' AND NOT d.stale
                              AND ss.since >= r.created_at AND ss.since < r.expires_at)
          FOR UPDATE OF r SKIP LOCKED
        ), expired AS (
          UPDATE reservations SET status = 'expired' FROM r WHERE reservations.id = r.id RETURNING reservations.spot_id
        ), s AS (
          SELECT id FROM spots WHERE id IN (SELECT spot_id FROM expired) AND status = 'reserved' FOR UPDATE SKIP LOCKED
        ), freed AS (
          UPDATE spots SET status = 'free', held_by = NULL, source = NULL, updated_at = now() FROM s WHERE spots.id = s.id
        )
        SELECT spot_id FROM expired
        """

    /// A hold whose car came in time is kept alive in the backend's own terms while its check-in waits (issue 36): the
    /// agent checks a car in only after `checkin_after` (2 minutes by default) of staying, and the backend's expiry —
    /// run by any reservation call, the app's own `GET /reservations/me` at the hold's end included — expires an
    /// `active` reservation whose `expires_at` has passed, whatever the sensors saw; the arrival was then recorded as
    /// unreserved. So an `active` reservation whose spot is sensed occupied (device not stale) since an arrival inside
    /// its window gets `expires_at = now() + holdKeptFor` whenever less than half of that is left: at the batch that
    /// applies the arrival and at every sweep. The check-in then fulfils it at the arrival. A car that leaves before
    /// its check-in (a passer-by, a wrong car) stops the renewal: the hold runs out at most `holdKeptFor` after its
    /// own time. $1: the spots (NULL: every spot, the sweep's). Returns the reservations kept.
    static let keepHoldsWithArrival = """
        WITH r AS (
          SELECT r.id FROM reservations r
          JOIN sensor_spots ss ON ss.spot_id = r.spot_id
          JOIN sensor_devices d ON d.site = ss.site AND d.device = ss.device
          WHERE r.status = 'active' AND ss.state = 'occupied' AND NOT d.stale
            AND ss.since >= r.created_at AND ss.since < r.expires_at
            AND r.expires_at < now() + interval '\(holdKeptFor / 2) seconds'
            AND ($1::text[] IS NULL OR r.spot_id = ANY($1::text[]))
          FOR UPDATE OF r SKIP LOCKED
        )
        UPDATE reservations SET expires_at = now() + interval '\(holdKeptFor) seconds' FROM r WHERE reservations.id = r.id
        RETURNING reservations.id
        """

    /// How long a hold whose car waits for its check-in is kept ahead (seconds): many sweeps, so a slow batch or sweep
    /// never lets the backend's expiry in first.
    static let holdKeptFor = 60

    /// The no-show rule ($1 seconds): a reservation the app checked in (`fulfilled`, not released) whose car the sensor
    /// never saw — its spot sensed free since before the check-in, its device online and not stale, no arrival matched
    /// to it — for longer than $1 is released the way the user's release would (`released`, `released_at = now()`);
    /// the re-assert then frees its spot. Recorded in `sensor_no_shows`, counted in telemetry (`sensor_no_show`).
    static let releaseNoShows = """
        WITH r AS (
          SELECT r.id FROM reservations r
          JOIN sensor_spots ss ON ss.spot_id = r.spot_id
          JOIN sensor_devices d ON d.site = ss.site AND d.device = ss.device
          WHERE r.status = 'fulfilled' AND r.released_at IS NULL
            AND r.checked_in_at < now() - make_interval(secs => $1::double precision)
            AND ss.state = 'free' AND (ss.since IS NULL OR ss.since <= r.checked_in_at) AND d.online AND NOT d.stale
            AND NOT EXISTS (SELECT 1 FROM sensor_arrivals a WHERE a.reservation_id = r.id)
          FOR UPDATE OF r SKIP LOCKED
        ), done AS (
          UPDATE reservations SET status = 'released', released_at = now() FROM r WHERE reservations.id = r.id
          RETURNING \(done)
        ), recorded AS (
          INSERT INTO sensor_no_shows (reservation_id, spot_id, user_id, checked_in_at, released_at)
          SELECT id, spot_id, user_id, checked_in_at, released_at FROM done ON CONFLICT DO NOTHING
        ), told AS (
          \(telemetry("sensor_no_show"))
        )
        SELECT spot_id FROM done
        """

    // MARK: Levels and snapshots

    static let levels = """
        INSERT INTO sensor_levels AS l (site, device, level_code, capacity, occupied, source, unknown)
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[], $7::int[]) ORDER BY 1, 2, 3
        ON CONFLICT (site, device, level_code) DO UPDATE SET
          capacity = EXCLUDED.capacity, occupied = EXCLUDED.occupied, source = EXCLUDED.source, unknown = EXCLUDED.unknown,
          updated_at = now()
        """

    /// One row per level per slot ($1 seconds, the slot chosen and written on the database's clock), like the
    /// simulator's; run at every sweep, `ON CONFLICT DO NOTHING`, so a slot is written once, as soon as there is data
    /// for it. Levels with spot sensors are counted from `spots`, and only while every sensed spot of the level is
    /// known: a spot whose sensor cannot see (unknown, its device stale) skips the level's row, whatever `spots` says of
    /// it (a hold or an app check-in there is no count of the level: one held spot in an outage made a row of total 1,
    /// reserved 1, which the forecasts read as 100 % full). An administrator's disabled spot is out of the total, as in
    /// the simulator's rows. Levels counted by lanes only take the level state, and none while its count is unknown.
    static let snapshot = """
        WITH slot AS (SELECT to_timestamp(floor(extract(epoch FROM now()) / $1::double precision) * $1::double precision) AS taken_at),
        sensed AS (
          SELECT sp.level_code, count(*) FILTER (WHERE sp.status <> 'disabled') AS total,
                 count(*) FILTER (WHERE sp.status = 'free') AS free,
                 count(*) FILTER (WHERE sp.status = 'reserved') AS reserved,
                 count(*) FILTER (WHERE sp.status = 'occupied') AS occupied,
                 count(*) FILTER (WHERE (ss.state = 'unknown' OR coalesce(d.stale, false))
                                  AND NOT (sp.status = 'disabled' AND sp.source IS DISTINCT FROM 'sensor')) AS unknown
          FROM spots sp
          LEFT JOIN sensor_spots ss ON ss.spot_id = sp.id
          LEFT JOIN sensor_devices d ON d.site = ss.site AND d.device = ss.device
          WHERE sp.level_code IN (SELECT s2.level_code FROM spots s2 JOIN sensor_spots ss ON ss.spot_id = s2.id)
          GROUP BY sp.level_code
        ),
        lanes AS (
          SELECT l.level_code, l.capacity AS total,
                 (SELECT count(*) FROM spots sp WHERE sp.level_code = l.level_code AND sp.status = 'reserved') AS reserved,
                 l.occupied
          FROM sensor_levels l
          WHERE l.source = 'lanes' AND l.occupied IS NOT NULL AND l.level_code NOT IN (SELECT level_code FROM sensed)
            AND l.level_code IN (SELECT code FROM levels)
        )
        INSERT INTO occupancy_snapshots (level_code, taken_at, total, free, reserved, occupied, source)
        SELECT level_code, (SELECT taken_at FROM slot), total, free, reserved, occupied, 'sensor' FROM sensed
        WHERE total > 0 AND unknown = 0
        UNION ALL
        SELECT level_code, (SELECT taken_at FROM slot), total, greatest(total - occupied - reserved, 0), reserved, occupied, 'sensor'
        FROM lanes
        ON CONFLICT (level_code, taken_at) DO NOTHING
        RETURNING level_code
        """
}

/// A PostgreSQL array literal (`{"a","b",NULL}`) of text values, for `unnest($n::type[])` and
/// `ANY($n::text[])` parameters: sent as one parameter, never spliced into SQL.
func textArray(_ values: some Sequence<String>) -> String {
    optionalArray(values.map { Optional($0) })
}

func optionalArray(_ values: some Sequence<String?>) -> String {
    // Byte by byte: the batch's JSON payloads go through here, so no Character-level work.
    var bytes: [UInt8] = [UInt8(ascii: "{")]
    var first = true
    for value in values {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        guard let value else {
            bytes += "NULL".utf8
            continue
        }
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
            bytes.append(byte)
        }
        bytes.append(UInt8(ascii: "\""))
    }
    bytes.append(UInt8(ascii: "}"))
    return String(decoding: bytes, as: UTF8.self)
}
