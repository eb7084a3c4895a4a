-- OdoKeep's own tables: vehicles and their fuel logs, as the app's backend
-- made them long before Outpost. Nothing here is written for Outpost; the
-- server maps these tables as they are (Examples/OdoKeep/outpost.json).
--
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f Examples/OdoKeep/schema.sql
--
-- Safe to run again: tables are created when missing, the trigger is
-- replaced, and the sample rows at the end are inserted once.
-- gen_random_uuid() is built into PostgreSQL 13 and later.

CREATE TABLE IF NOT EXISTS public.vehicles (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id     text NOT NULL,
    fleet_id    text,
    name        text NOT NULL,
    plate       text UNIQUE,
    odometer_km integer,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS public.fuel_logs (
    id              uuid PRIMARY KEY,
    user_id         text NOT NULL,
    fleet_id        text,
    vehicle_id      uuid NOT NULL REFERENCES public.vehicles (id) ON DELETE CASCADE,
    liters          numeric(8, 2) NOT NULL CHECK (liters > 0 AND liters < 500),
    price_per_liter numeric(6, 3) NOT NULL,
    total_cost      numeric(10, 2),
    odometer_km     integer,
    filled_at       timestamptz NOT NULL DEFAULT now(),
    note            text
);

CREATE INDEX IF NOT EXISTS fuel_logs_vehicle_id_idx ON public.fuel_logs (vehicle_id);
CREATE INDEX IF NOT EXISTS fuel_logs_user_id_filled_at_idx ON public.fuel_logs (user_id, filled_at);

-- The cost of a fill is the database's business, whoever writes the row:
-- the phone never sends it, the backend never has to remember it.
CREATE OR REPLACE FUNCTION public.fuel_logs_total_cost() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.total_cost := round(NEW.liters * NEW.price_per_liter, 2);
    RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS fuel_logs_total_cost ON public.fuel_logs;
CREATE TRIGGER fuel_logs_total_cost
    BEFORE INSERT OR UPDATE ON public.fuel_logs
    FOR EACH ROW EXECUTE FUNCTION public.fuel_logs_total_cost();

-- Rows the app already had before it synced with Outpost: Ana's van and
-- two fills, one of Bruno's cars (same fleet), and a car outside the fleet.
INSERT INTO public.vehicles (id, user_id, fleet_id, name, plate, odometer_km, created_at) VALUES
    ('5d0e4a52-3c1b-4a8e-9f11-0a6b2c7d8e01', 'ana',   'north', 'Blue van',    'AB-123-CD', 84210, '2026-03-02 08:00:00+00'),
    ('5d0e4a52-3c1b-4a8e-9f11-0a6b2c7d8e02', 'bruno', 'north', 'Grey estate', 'EF-456-GH', 51990, '2026-04-11 09:30:00+00'),
    ('5d0e4a52-3c1b-4a8e-9f11-0a6b2c7d8e03', 'dora',  NULL,    'Red hatch',   'IJ-789-KL', 12005, '2026-05-20 17:15:00+00')
ON CONFLICT DO NOTHING;

INSERT INTO public.fuel_logs (id, user_id, fleet_id, vehicle_id, liters, price_per_liter, odometer_km, filled_at, note) VALUES
    ('7a1f9c30-6b2d-4e5f-8a9b-1c2d3e4f5a01', 'ana',   'north', '5d0e4a52-3c1b-4a8e-9f11-0a6b2c7d8e01', 61.40, 1.839, 84010, '2026-11-20 07:42:00+00', 'motorway station'),
    ('7a1f9c30-6b2d-4e5f-8a9b-1c2d3e4f5a02', 'ana',   'north', '5d0e4a52-3c1b-4a8e-9f11-0a6b2c7d8e01', 58.05, 1.859, 84210, '2026-11-27 18:05:00+00', NULL),
    ('7a1f9c30-6b2d-4e5f-8a9b-1c2d3e4f5a03', 'bruno', 'north', '5d0e4a52-3c1b-4a8e-9f11-0a6b2c7d8e02', 40.00, 1.799, 51990, '2026-11-25 12:00:00+00', 'receipt in the glovebox')
ON CONFLICT DO NOTHING;
