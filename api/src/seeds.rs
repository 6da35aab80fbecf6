//! The day the project's seeded simulations (watch, merge, sync, two-way, composed) take
//! their new seeds from, so a run's seeds are known from its date and can be run again
//! whole, where a CI log that keeps only the head and tail of a failure's output may not
//! keep its replay line; each day explores others.

/// `FSD_SEED_DAY` (days since 1970), else today's (UTC).
pub fn day() -> u64 {
    std::env::var("FSD_SEED_DAY")
        .ok()
        .and_then(|day| day.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_secs() / 86_400)
        })
}
