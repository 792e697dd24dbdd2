import Foundation

/// The figures every measurement of `subledger bench` shares.
enum BenchStatistics {
    /// The process's peak resident memory so far, in MB (`ru_maxrss`, the
    /// kernel's high-water mark of the service and the clients together).
    static func peakResidentMegabytes() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_maxrss) / 1024
    }

    /// The sample at fraction `fraction` (0.5: p50, 0.99: p99) of `sorted`,
    /// by nearest rank; nil when there are none.
    static func percentile<Sample>(_ fraction: Double, of sorted: [Sample]) -> Sample? {
        sorted.isEmpty ? nil : sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
    }
}
