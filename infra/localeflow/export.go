package localeflow

// Settings is the validated form of the props; the app prints its summary
// lines (OutageToleranceLine, EncryptionLine, AlarmsLine).
type Settings = stackConfig

// Resolve validates props as NewLocaleflowStack does.
func Resolve(props *LocaleflowStackProps) (Settings, error) { return resolve(props) }
