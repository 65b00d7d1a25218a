/** The version of the plugin contract; plugins declare the range they support. */
export const CORE_VERSION = '2.0.0';
