import Foundation

extension Duration {
    /// The duration in seconds, as a floating-point number (what `Date`
    /// arithmetic, SQL intervals and rates take).
    public var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
