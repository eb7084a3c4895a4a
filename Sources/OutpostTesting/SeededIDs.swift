public import OutpostCore

extension UUIDv7Generator {
    /// Ids that follow from a seed and a (usually manual) clock.
    public static func seeded(_ seed: UInt64, clock: any WallClock) -> UUIDv7Generator {
        UUIDv7Generator(clock: clock, random: SeededRandom(seed: seed))
    }
}
