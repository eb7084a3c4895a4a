#!/usr/bin/env bash
# OdoKeep's own backend at work: it writes to the same tables as Outpost, with
# plain SQL, while devices sync. Each round it
#   1. adds a pool vehicle for the user (INSERT into vehicles),
#   2. imports a fill from the fleet's fuel card for that vehicle (INSERT),
#   3. writes a note on the user's latest fill (UPDATE of one column),
#   4. deletes the previous round's fuel-card import (DELETE),
# then sleeps. Devices see each write as a change of their collections: a
# new record, a changed field, a deletion.
#
#   DATABASE_URL=postgres://… Examples/OdoKeep/backend.sh [--rounds N] [--sleep SECONDS] [--user ID] [--fleet ID]
#
# The connection comes from DATABASE_URL (libpq: a password belongs in
# ~/.pgpass or PGPASSWORD, never on this command line).
set -euo pipefail

usage="usage: DATABASE_URL=postgres://… $0 [--rounds N] [--sleep SECONDS] [--user ID] [--fleet ID]"
rounds=10
pause=3
user=ana
fleet=north

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:?$usage}; shift 2 ;;
    --sleep) pause=${2:?$usage}; shift 2 ;;
    --user) user=${2:?$usage}; shift 2 ;;
    --fleet) fleet=${2:?$usage}; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "$usage" >&2; exit 64 ;;
  esac
done

if [ -z "${DATABASE_URL:-}" ]; then
  echo "backend.sh: set DATABASE_URL to the app's database (postgres://…)" >&2
  echo "$usage" >&2
  exit 64
fi
case "$rounds" in ''|*[!0-9]*) echo "backend.sh: --rounds takes a whole number" >&2; exit 64 ;; esac
case "$pause" in ''|*[!0-9.]*) echo "backend.sh: --sleep takes a number of seconds" >&2; exit 64 ;; esac
command -v psql >/dev/null || { echo "backend.sh: psql is not installed" >&2; exit 1; }

# Values travel as psql variables (:'user'), quoted by psql, never pasted
# into the SQL text. Each statement is its own transaction, as in a backend
# that uses autocommit.
sql() {
  psql "$DATABASE_URL" -X -q -t -A -v ON_ERROR_STOP=1 \
    -v user="$user" -v fleet="$fleet" -v round="$round" -v stamp="$stamp" "$@"
}

for round in $(seq 1 "$rounds"); do
  stamp=$(date -u +%H:%M:%S)
  sql <<'SQL'
WITH vehicle AS (
    INSERT INTO public.vehicles (user_id, fleet_id, name, odometer_km)
    VALUES (:'user', :'fleet', 'Pool car ' || :'stamp', 1000 * :'round'::integer)
    RETURNING id
), import AS (
    INSERT INTO public.fuel_logs (id, user_id, fleet_id, vehicle_id, liters, price_per_liter, note)
    SELECT gen_random_uuid(), :'user', :'fleet', vehicle.id, 35 + :'round'::integer, 1.849, 'fuel card import'
    FROM vehicle
    RETURNING vehicle_id, total_cost
)
SELECT 'round ' || :'round' || ': added vehicle ' || vehicle_id || ' and a fuel-card fill of ' || total_cost
FROM import;

WITH latest AS (
    SELECT id FROM public.fuel_logs
    WHERE user_id = :'user' AND note IS DISTINCT FROM 'fuel card import'
    ORDER BY filled_at DESC
    LIMIT 1
)
UPDATE public.fuel_logs
SET note = 'checked by the office at ' || :'stamp'
FROM latest
WHERE fuel_logs.id = latest.id
RETURNING 'round ' || :'round' || ': noted fill ' || fuel_logs.id;

WITH older AS (
    SELECT id FROM public.fuel_logs
    WHERE user_id = :'user' AND note = 'fuel card import'
    ORDER BY filled_at DESC
    OFFSET 1
)
DELETE FROM public.fuel_logs
USING older
WHERE fuel_logs.id = older.id
RETURNING 'round ' || :'round' || ': deleted fill ' || fuel_logs.id;
SQL
  if [ "$round" -lt "$rounds" ]; then sleep "$pause"; fi
done
