import Foundation

/// The intervals the analytics are counted in (docs/analytics.md): UTC
/// days, ISO weeks (Monday 00:00) and calendar months. The contribution
/// judges churn and retention at their ends; the queries list them.
public enum AnalyticsInterval: String, Sendable, CaseIterable {
    case day, week, month

    package static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// The start of the interval `instant` falls in: a UTC midnight, a
    /// Monday midnight (ISO weeks), a month's first midnight.
    public func start(of instant: Date) -> Date {
        let day = AnalyticsItem.flowDay(of: instant)
        switch self {
        case .day: return Date(timeIntervalSince1970: Double(day) * 86_400)
        // 1970-01-01 was a Thursday, three days after a Monday.
        case .week: return Date(timeIntervalSince1970: Double(day - ((day + 3) % 7 + 7) % 7) * 86_400)
        case .month:
            let parts = Self.utc.dateComponents([.year, .month], from: instant)
            return Self.utc.date(from: DateComponents(year: parts.year, month: parts.month, day: 1))!
        }
    }

    /// The end of the interval `instant` falls in: the next one's start.
    public func end(of instant: Date) -> Date { next(after: start(of: instant)) }

    /// The start of the next interval after the one starting at `start`.
    public func next(after start: Date) -> Date {
        switch self {
        case .day: start + 86_400
        case .week: start + 7 * 86_400
        case .month: Self.utc.date(byAdding: .month, value: 1, to: start)!
        }
    }

    /// Where a series starts when no `from` is given: `count` intervals
    /// before the one `to` falls in.
    public func start(_ count: Int, before to: Date) -> Date {
        var start = start(of: to)
        for _ in 0..<count { start = self.start(of: start - 1) }
        return start
    }

    /// The intervals from the one holding `from` to the last one starting before `to`.
    public func intervals(from: Date, to: Date, limit: Int) -> [(start: Date, end: Date)]? {
        var intervals: [(start: Date, end: Date)] = []
        var start = start(of: from)
        while start < to {
            guard intervals.count < limit else { return nil }
            let end = next(after: start)
            intervals.append((start, end))
            start = end
        }
        return intervals
    }

    /// The churn judged at this interval's end (docs/decisions/0006).
    public var churnMetric: AnalyticsMetric {
        switch self {
        case .day: .churnedDay
        case .week: .churnedWeek
        case .month: .churnedMonth
        }
    }

    /// Retention by cohorts of this interval (weeks or months).
    public var retentionMetric: AnalyticsMetric { self == .week ? .retainedWeek : .retainedMonth }
}
