/** Configuration: every setting declared once, validated at start, documented from the declaration. */
export { ConfigError, loadConfig, replicaRefusal, type WharfConfig } from "./config.ts";
export {
  loadSettings,
  readSetting,
  SETTINGS,
  SettingsError,
  type SettingDeclaration,
  type SettingName,
  type SettingPart,
  type Settings,
} from "./settings.ts";
export { settingsHelp, settingsTable, withSettingsTable } from "./settings-docs.ts";
export { hostVariable, processEnvironment, type HostVariable } from "./host-variables.ts";
