import Foundation
import JSON

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
            let civil = CivilDate.civilFromDays(day)
            return Date(timeIntervalSince1970: Double(CivilDate.daysFromCivil(year: civil.year, month: civil.month, day: 1)) * 86_400)
        }
    }

    /// The calendar month `instant` falls in, counted from year 0 (year × 12
    /// + month − 1): integer arithmetic on its UTC day, where Foundation's
    /// calendar took a few microseconds a call (a rebuild of the analytics
    /// asks hundreds of thousands of times).
    package static func monthIndex(of instant: Date) -> Int {
        let civil = CivilDate.civilFromDays(AnalyticsItem.flowDay(of: instant))
        return civil.year * 12 + civil.month - 1
    }

    /// The end of the interval `instant` falls in: the next one's start.
    public func end(of instant: Date) -> Date { next(after: start(of: instant)) }

    /// The start of the next interval after the one starting at `start`.
    public func next(after start: Date) -> Date {
        switch self {
        case .day: start + 86_400
        case .week: start + 7 * 86_400
        // As the calendar adds a month: the same day (the month's last if
        // shorter) and time of day.
        case .month: ISODuration(months: 1).added(to: start)
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
